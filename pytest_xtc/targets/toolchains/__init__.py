"""What the built-in adapters drive outside XTC, by concern: finding a toolchain or a
device, and checking what it produced. Part of the targets layer; no adapter lives here
(each is one file in ``targets/``, found through entry points)."""
