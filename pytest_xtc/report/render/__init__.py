"""Rendering for people: safe text and tables, check lines, summary.md, perf.svg, the
formats list. No pytest."""
