"""Settings of the whole pytest run.

RELAX_MLIR_BUILDS=first (knobs.builds): a CPU compile makes only the build its smallest calls
take; a test whose calls reach the multi-threaded threshold still compiles and runs that build (at
its first such call). The default (`all`, both builds in compile()) doubled the CPU lowering and
LLVM time of nearly every compile over a symbolic dim while the threaded build of most tests was
never called; test_executable.py checks both settings. Child processes inherit it."""
import os

os.environ.setdefault("RELAX_MLIR_BUILDS", "first")
