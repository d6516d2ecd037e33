"""The suite's core: no pytest, serving the plugin, scripts and ``xtc-conformance`` alike.

Layers, each importing only those below it (``tests/test_architecture.py`` checks):

- ``execution/``: where a target's work runs (inline, forked worker, isolated adapter
  host), time limits, placement, performance, the adapter registry;
- ``adapter.py``: the vendor interface every target implements;
- ``judging/``: the float64 reference, the error bounds and the comparison;
- ``cases/``: what a case is (catalog entries, case files, graphs, inputs, selectors,
  expectations);
- ``outcome.py``, ``limits.py``, ``versions.py``: the shared vocabulary.
"""

from pytest_xtc.core import moved

moved.install()
