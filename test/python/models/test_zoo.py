"""The real-model zoo (zoo.py): each model exported with a symbolic batch and sequence length,
imported, compiled ONCE and run at three sizes against jax.jit; and its static-shape export.
zoo.PENDING holds the models that still fail (not collected here), each with its error today (none
now). bf16/f16 results are checked in units of their precision (zoo.check_low_precision)."""
import pytest

pytest.importorskip("transformers")
pytest.importorskip("flax")
pytest.importorskip("equinox")

import zoo  # noqa: E402


@pytest.mark.parametrize("name", sorted(zoo.MODELS))
def test_model_symbolic(name):
    zoo.check_case(zoo.MODELS[name]())


@pytest.mark.parametrize("name", sorted(zoo.MODELS))
def test_model_static(name):
    zoo.check_static(zoo.MODELS[name]())


def test_tables_are_disjoint_and_complete():
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
