"""SPMD programs on 2 MPI ranks over loopback (mpiexec from PyPI mpich): every case of
spmd_worker.py compiles once per rank and is compared with jax.jit at several symbol values."""
import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = ["mlp_tensor_parallel", "data_parallel", "collectives", "named_sharding_data_parallel",
         "named_sharding_tensor_parallel", "named_sharding_gathered_result", "two_axis_mesh", "unused_argument", "artifact_on_every_rank", "stablehlo_text_collectives", "integer_and_half_collectives",
         "dot_operand_gathered", "replicated_fallback",
         "local_symbol_of_split_dim",
         "bad_rank_input"]


def _mpiexec():
    exe = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if not os.path.exists(exe):
        exe = shutil.which("mpiexec")
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return None
    return exe


MPIEXEC = _mpiexec()
pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="MPI is not installed (pip install -e '.[mpi]': PyPI "
                                                          "mpich and mpi4py)")


def test_every_case_on_every_rank(tmp_path):
    """One mpiexec for all the cases (one test, so that pytest-xdist workers do not each start
    it); every failing case on every rank is reported."""
    out = tmp_path
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(HERE, "..", "..", "..", "python"), env.get("PYTHONPATH", "")])
    proc = subprocess.run([MPIEXEC, "-n", "2", sys.executable, os.path.join(HERE, "spmd_worker.py"), str(out)],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    failures = []
    for r in range(2):
        with open(out / f"rank{r}.json") as fh:
            res = json.load(fh)
        assert sorted(res) == sorted(CASES), sorted(res)
        failures += [f"rank {r} {name}: {res[name]}" for name in CASES if res[name] != "ok"]
    assert not failures, "\n".join(failures)


EXAMPLES = os.path.join(HERE, "..", "..", "..", "examples", "spmd")


@pytest.mark.parametrize("example, args", [("mlp_tp.py", ["1", "7", "40"]), ("data_parallel.py", ["2", "14", "30"]),
                                           ("attention_tp.py", ["1", "5", "16"])])
def test_example(example, args):
    """Each example checks itself against jax.jit (assert_allclose on every rank) at three sizes."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(HERE, "..", "..", "..", "python"), env.get("PYTHONPATH", "")])
    proc = subprocess.run([MPIEXEC, "-n", "2", sys.executable, os.path.join(EXAMPLES, example), *args],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count(" ok") == 1, proc.stdout  # rank 0 reports once
