"""``xtc-conformance import``: the layers of an ONNX model as case files.

Nothing here imports pytest; ``onnx`` is imported only once the command runs
(:mod:`.command` checks for it first), so the plugin and every other command work without
the ``onnx`` extra.
"""
