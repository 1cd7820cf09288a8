"""The importable Python module MLIR looks up for the unregistered `relax_v` namespace (see relax.py)."""
