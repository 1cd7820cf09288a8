"""The real-model zoo (zoo.py): each model exported with a symbolic batch and sequence length,
imported, compiled ONCE and run at three sizes against jax.jit; and, for one or two models of each
family (zoo.STATIC), its static-shape export.
zoo.PENDING holds the models that still fail (not collected here), each with its error today (none
now). bf16/f16 results are checked in units of their precision (zoo.check_low_precision)."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("transformers")
pytest.importorskip("flax")
pytest.importorskip("equinox")

import zoo  # noqa: E402


# In this process: the models that share it with the rest of the suite; in the fresh interpreter
# test_separate_process_models starts: only the others (their library loads tensorflow, see zoo.py).
HERE = sorted(n for n in zoo.MODELS if (n in zoo.SEPARATE_PROCESS) == bool(os.environ.get(zoo.GEMMA_PROCESS)))


@pytest.mark.parametrize("name", HERE)
def test_model_symbolic(name):
    zoo.check_case(zoo.MODELS[name]())


@pytest.mark.parametrize("name", [n for n in HERE if n in zoo.STATIC])
def test_model_static(name):
    zoo.check_static(zoo.MODELS[name]())


@pytest.mark.skipif(bool(os.environ.get(zoo.GEMMA_PROCESS)), reason="the separate process itself")
def test_separate_process_models():
    """gemma (tensorflow) in a fresh interpreter: the same symbolic and static checks."""
    env = {**os.environ, zoo.GEMMA_PROCESS: "1"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", __file__,
                        "-k", "test_model_"], env=env, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert f"{2 * len(zoo.SEPARATE_PROCESS)} passed" in r.stdout, r.stdout[-3000:]


def test_tables_are_disjoint_and_complete():
    assert set(zoo.STATIC) <= set(zoo.MODELS)
    assert not set(zoo.MODELS) & set(zoo.PENDING)
    assert set(zoo.MODELS) | set(zoo.PENDING) == set(zoo.ALL)
    assert all(why for _, why in zoo.PENDING.values())


def test_low_precision_check_catches_errors():
    """The bf16 criterion rejects a result off by more than rounding, and one less accurate than
    jax.jit against the f32 model; it accepts jax.jit's own result."""
    import ml_dtypes
    import numpy as np

    rng = np.random.default_rng(0)
    truth = rng.standard_normal(256).astype(np.float32)
    w = truth.astype(ml_dtypes.bfloat16)
    zoo.check_low_precision(w, w, truth, "same")
    bad = w.copy()
    bad[17] = ml_dtypes.bfloat16(float(w[17]) + 0.05 * float(np.abs(truth).max()))
    with pytest.raises(AssertionError, match="jax.jit"):
        zoo.check_low_precision(bad, w, truth, "off")
    # within the tolerance of jax.jit but further from the f32 result than jax.jit everywhere
    worse = (truth + 0.012 * np.abs(truth).max()).astype(ml_dtypes.bfloat16)
    with pytest.raises(AssertionError, match="f32 model"):
        zoo.check_low_precision(worse, w, truth, "worse")
