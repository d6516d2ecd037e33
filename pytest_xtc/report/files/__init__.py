"""Bundle files on disk: atomic writes, and reading untrusted bundles within limits. No pytest."""
