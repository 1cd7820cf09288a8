"""The gradient fuzzer (grad_campaign.py) on the seeds it found bugs with: jax.grad of a
generated program (a convolution whose output has a 0 dim, seeds 2412535 and 2412379) compiles
and equals jax.jit at every binding; its forward mode (jax.jvp) on the seeds whose derivatives
are variadic reduce_windows (a generic sum pool, 2442354; a generic min pool whose body's jvp
uses constants of the enclosing function, 2442563; refused before); run as a child process, as
the campaign runs (float64)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("jax")

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("mode, seeds", [("grad", "2412535,2412379"), ("jvp", "2442354,2442563")])
def test_derivatives_of_the_seeds_that_found_bugs(mode, seeds):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "..", "..", "python"),
                                                       os.path.join(HERE, "..")]))
    p = subprocess.run([sys.executable, os.path.join(HERE, "grad_campaign.py"), "--mode", mode, "--seeds", seeds],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert p.stdout.strip().splitlines()[-1] == "{'ok': 2}", p.stdout
