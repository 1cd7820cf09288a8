"""The importable Python module MLIR looks up for the `relax` dialect.

Its existence matters: without it every `.type` / `.opview` access retries a failing import
(measured 60-80 µs per op instead of ~2 µs). Relax ops have no generated OpView classes; they
are built with `ir.Operation.create` by `relax_mlir.builder`.
"""
