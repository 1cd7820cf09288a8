"""The module MLIR's dialect lookup finds for upstream `async` (its own Python module is
`mlir.dialects.async_dialect`, not `mlir.dialects.async`): without it every `.type` / `.opview`
access of an async op or value retried the failing import, 25-50 us each (9,569 times, 0.46 s, in
one walk of a 12-layer Llama's threaded build: the CPU backend's bf16 scan)."""
