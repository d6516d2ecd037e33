"""Report bundles, without pytest, by role, each layer importing only those below it:

- the verbs, here: ``bundle`` (write and read a bundle), ``suitecheck`` (a bundle against
  the installed suite), ``verify``, ``merge``, ``replay`` (rebuild and rerun one case) and
  ``audit`` (the rerun audit of ``verify --rerun``);
- ``render/``: text for people, check lines, summary.md, perf.svg, the formats list;
- ``rules/``: certification rules: profiles, waivers, the case set, verdicts;
- ``parts/``: the typed parts: records, the report model, its schema, reason codes, the
  environment;
- ``files/``: atomic writes, and reading untrusted bundles within limits.
"""

import pytest_xtc.core  # noqa: F401  (resolves the module paths of earlier versions)
