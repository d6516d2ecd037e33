"""Built-in target adapters, one per file, registered under ``pytest_xtc.targets``."""
