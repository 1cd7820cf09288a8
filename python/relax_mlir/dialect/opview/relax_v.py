"""The importable Python module MLIR looks up for the `relax_v` ops (unregistered, see
dialect/__init__.py): as for `relax`, without it every `.type` / `.opview` access of one retries
a failing import."""
