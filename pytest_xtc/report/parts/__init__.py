"""The typed parts of a report: records, the report model, its schema, reason codes, the
environment. No pytest."""
