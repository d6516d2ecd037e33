"""An example third-party target for pytest-xtc, registered through an entry point."""

from xtc_example_adapter.target import ExampleHostO1

__all__ = ["ExampleHostO1"]
