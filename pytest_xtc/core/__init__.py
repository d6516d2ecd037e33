"""The suite's core: no pytest, serving the plugin, scripts and ``xtc-conformance`` alike.

Layers, each importing only those below it (``tests/acceptance/test_architecture.py`` checks):

- ``xtc/``: the bridge to XTC that targets build on (compiling, scheduling, runtimes);
- ``adapters/``: finding the installed targets (registry, their declarations, kept across
  sessions);
- ``execution/``: a case run (runner, work, executors, order, guard bands, placement,
  performance);
- ``workers/``: worker processes (forking, serving, containment, shared-memory transfer,
  interrupts);
- ``adapter.py``: the vendor interface every target implements;
- ``judging/``: the float64 reference, the error bounds and the comparison;
- ``cases/``: what a case is (catalog entries, case files, graphs, inputs, selectors,
  expectations);
- ``outcome.py``, ``limits.py``, ``versions.py``: the shared vocabulary.
"""

from pytest_xtc.core import moved

moved.install()
