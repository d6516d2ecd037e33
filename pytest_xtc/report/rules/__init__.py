"""Certification rules: profiles, waivers, the case set, verdicts. No pytest."""
