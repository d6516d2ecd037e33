"""Report bundles, without pytest: records, case-set identity, profiles, waivers, verdicts,
the bundle's files and formats, verify, merge, the replay of a bundle's case and the rerun audit."""
