"""Where and how a target's work runs: the runner, the work a worker does, isolation
(forked workers, the isolated adapter host), time limits, device placement, performance
records and the adapter registry. The one layer that calls adapters."""
