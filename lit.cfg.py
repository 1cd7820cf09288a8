# lit configuration for relax-mlir: FileCheck tests of relax-opt and the Python API.
import os
import shutil
import sys

import lit.formats

config.name = "relax-mlir"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
config.test_exec_root = os.path.join(config.test_source_root, "build", "lit")
# Only test/ holds lit tests; pytest tests live in test/python.
config.excludes = ["python", "dialects", "examples", "bench", "build", ".venv", "Inputs", "fixtures",
                   "conftest.py", "__pycache__", "lit.cfg.py", "setup.py", ".git", ".ci"]

import mlir  # noqa: E402  (namespace package: use __path__, not __file__)
import llvm  # noqa: E402

mlir_bin = os.path.join(list(mlir.__path__)[0], "bin")
llvm_bin = os.path.join(list(llvm.__path__)[0], "bin")
venv_bin = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join([venv_bin, llvm_bin, mlir_bin, config.environment.get("PATH", "")])
for k in ("HOME", "RELAX_MLIR_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    if k in os.environ:
        config.environment[k] = os.environ[k]

root = os.path.dirname(os.path.abspath(__file__))
# The tools run this tree's package (a git worktree or a copy), not the one installed in .venv.
config.environment["PYTHONPATH"] = os.pathsep.join(
    p for p in (os.path.join(root, "python"), os.environ.get("PYTHONPATH", "")) if p)
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%PYTHON", sys.executable))
config.substitutions.append(("%relax_irdl", os.path.join(root, "dialects", "relax.irdl.mlir")))
config.substitutions.append(("%root", root))
if shutil.which("ptxas"):
    config.available_features.add("ptxas")
if shutil.which("spirv-val"):
    config.available_features.add("spirv-val")
