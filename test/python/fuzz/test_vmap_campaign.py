"""The batching fuzzer (vmap_campaign.py) on seeds whose programs batch a dynamic_slice with
batched starts (a gather), a lax.cond on a batched predicate, a scan, a sort and an `.at[]`
update over a symbolic batch `b`: each compiles once and equals jax.jit of the same vmap at
every binding; run as a child process, as the campaign runs (float64)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("jax")

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = (2415482, 2415406, 2415402, 2415472, 2415434)


def test_vmapped_programs_equal_jax():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "..", "..", "python"),
                                                       os.path.join(HERE, "..")]))
    p = subprocess.run([sys.executable, os.path.join(HERE, "vmap_campaign.py"), "--seeds", ",".join(map(str, SEEDS))],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert p.stdout.strip().splitlines()[-1] == f"{{'ok': {len(SEEDS)}}}", p.stdout
