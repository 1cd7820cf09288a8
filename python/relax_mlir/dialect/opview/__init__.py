"""Search prefix for MLIR's dialect-module lookup (see dialect/__init__.py)."""
