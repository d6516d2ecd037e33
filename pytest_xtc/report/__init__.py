"""Report bundles, without pytest: records, case-set identity, profiles, waivers, verdicts,
the bundle's files and formats, verify, merge and the rerun audit."""
