"""The bridge to XTC that targets build on: ``xtc_env`` compiles and runs a case's graph with
XTC, ``scheduling`` turns a case's schedule into XTC scheduler calls, ``runtime_cache`` keeps
XTC's compiled runtimes across sessions."""
