"""A case run: the runner, the work a case does, the executors that place it
(``executors/``: inline, forked worker, isolated adapter host through ``remote``), the order
check, guard bands, operand placement in the compiled IR, performance records and the
suite's expansion of cases. The one layer that calls adapters; the worker processes it runs
in are ``core/workers/``."""
