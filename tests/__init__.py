"""The plugin's own tests: ``unit/`` mirrors the package (``unit/<package path>/
test_<module>.py``), ``acceptance/`` holds end-to-end themes, ``support/`` shared helpers."""

from pathlib import Path

#: the checkout's root, and the tests' data files
ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
