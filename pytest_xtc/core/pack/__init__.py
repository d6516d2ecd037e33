"""Execution packs: compile here, run there (a device runner with numpy only), judge here
(docs/split-run.md). No pytest."""
