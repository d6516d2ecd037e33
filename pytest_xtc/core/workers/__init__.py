"""Worker processes, whatever runs in them: ``isolation`` forks and drives them, ``serving``
is the child's side, ``containment`` keeps a child's process tree in hand, ``hygiene`` a
clean state per case, ``transfer`` moves operands through shared memory and ``interrupts``
carries a signal to the next wait. Knows nothing of cases or adapters."""
