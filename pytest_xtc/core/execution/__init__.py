"""Where and how a target's work runs: the runner, the work a worker does, the executors
that place it (``executors/``: inline, forked worker, isolated adapter host), isolation
(forked workers: ``isolation``, their side ``serving``, ``containment``, a clean state
per case ``hygiene``, operands through shared memory ``transfer``), time limits, device
placement, performance records, the adapter registry and what the adapters declare
(``adapter_declarations``). The one layer that calls adapters."""
