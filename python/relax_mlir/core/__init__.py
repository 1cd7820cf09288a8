"""The compiler core, used by the CLI (`relax-opt`) and the library (`relax_mlir.compile`) alike:
`session` (an MLIR context with the relax dialect, collecting diagnostics; `parse_module`),
`diagnostics` (`Diag`, `CompileError`, did-you-mean) and `pipeline` (`run_pipeline`: relax and
upstream passes in one PassManager). Import the submodules; this package imports nothing."""
