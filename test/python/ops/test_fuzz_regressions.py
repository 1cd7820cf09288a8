"""Minimized programs the differential fuzzer (test/python/fuzz) found, each compared with jax.jit
at several sizes from one compile, on the CPU and (in a child process) on Vulkan."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

jax = pytest.importorskip("jax")

from toolchecks import vulkan_adapter  # noqa: E402

CASES = textwrap.dedent("""
    import numpy as np, jax, jax.numpy as jnp
    from relax_mlir.frontend.jax import from_jax
    jax.config.update("jax_enable_x64", True)
    n = jax.export.symbolic_shape("n")[0]
    S = jax.ShapeDtypeStruct
    CASES = {
        # dot_general on bools is an or of ands (linalg.matmul would add with xor)
        "bool_einsum": (lambda a: jnp.einsum("bij,bij->bi", a, a), [S((n, n, 3), jnp.bool_)]),
        "bool_matmul": (lambda a, b: a @ b, [S((n, 5), jnp.bool_), S((5, 4), jnp.bool_)]),
        "bool_outer": (lambda v: jnp.einsum("i,j->ij", v, v), [S((n,), jnp.bool_)]),
        # concat with a static 0 dim: an empty result, empty pieces first and last
        "stack_of_empty": (lambda a, b, m: jnp.stack([jnp.where(m, a.astype(jnp.float32), b).reshape(-1)] * 4),
                           [S((0, 4), jnp.int8), S((0, 4), jnp.float32), S((0, 1), jnp.bool_)]),
        "concat_empty_last": (lambda a, b: jnp.concatenate([a, b], axis=1), [S((n, 3), jnp.float32), S((n, 0), jnp.float32)]),
        "concat_empty_around": (lambda a, b: jnp.concatenate([b, a, b], axis=1),
                                [S((n, 3), jnp.float32), S((n, 0), jnp.float32)]),
        # f16/bf16 products and sums in f32, rounded once (a product of 65504 and -3.9 is finite,
        # so a row with +inf stays +inf instead of inf - inf = NaN)
        "f16_matmul_with_inf": (lambda a: jnp.concatenate([a, a], axis=0) @ a, [S((n, n), jnp.float16)]),
        "bf16_batched_matmul": (lambda a, b: jnp.einsum("bij,bjk->bik", a, b), [S((2, n, 5), jnp.bfloat16),
                                                                               S((2, 5, 3), jnp.bfloat16)]),
        # bf16 vector arithmetic aborted LLVM on x86 (soft promotion of a bf16 broadcast)
        "bf16_broadcast_mul": (lambda a, s: jnp.concatenate([a, a, a]) * s, [S((3,), jnp.bfloat16), S((), jnp.bfloat16)]),
        # bf16 math ops (copysign in the float-to-int saturation) also compute in f32; unfused, a
        # bf16 copysign kernel aborted LLVM
        "bf16_clamp_to_int": (lambda a: jnp.where(jnp.isnan(a), 0, jnp.clip(jax.lax.clamp(
            jnp.asarray(-2, a.dtype), a, jnp.asarray(3, a.dtype)), -1000, 1000)).astype(jnp.int32), [S((n, n), jnp.bfloat16)],
                              "relax-fuse-kernels"),
        # Vulkan emulates i8/i16 in 32 bits with wrapped values left unnormalized: a widening to
        # i64 (or i8 -> i16) must see the wrapped value (int8 17 * 17 is 33, not 289)
        "i8_wrap_then_widen": (lambda a, b: [((a - b) * (a - b)).astype(t) for t in (jnp.int64, jnp.int16, jnp.int32)],
                               [S((n,), jnp.int8), S((), jnp.int8)]),
        "i16_wrap_then_widen": (lambda a, b: ((a * 300 - b) * (a * 300 - b)).astype(jnp.int64),
                                [S((n,), jnp.int16), S((), jnp.int16)]),
        # a bool column picked by a run-time index is read inside the kernel (tensor.extract of a
        # captured i1 tensor): vectorized, it became a gather of bit-packed i1 (seed 1500023)
        "bool_column_by_index": (lambda a, i: jnp.where(a[:, i], i, 7), [S((n, 5), jnp.bool_), S((), jnp.int32)]),
        # integer tables the importer knows by value with no element (an iota over a static 0 dim;
        # seeds 1500214, 1500252: "Attributes list must be non-empty")
        "iota_of_empty": (lambda a, b: (jnp.arange(a[:-2:3].shape[0])[:, None] >= jnp.arange(a[:-2:3].shape[0])[None, :],
                                        jnp.ravel(b) % 3 != jnp.ravel(b), b.sum() + a[:1].sum()),
                          [S((2, 4), jnp.int32), S((0, 0, 1), jnp.int32)]),
        # jax's "rbg" PRNG: stablehlo.rng_bit_generator (XLA's Philox on the CPU) over a symbolic
        # dim, 32- and 64-bit draws (frontend/stablehlo/random.py; refused before)
        # (f32 bounds: a Python float bound is an f64 argument of jax's _uniform under x64, which Vulkan refuses)
        "rbg_draws": (lambda kd, x: (x + jax.random.uniform(jax.random.wrap_key_data(kd, impl="rbg"), x.shape,
                                                            jnp.float32, jnp.float32(0), jnp.float32(1)),
                                     jax.random.bits(jax.random.wrap_key_data(kd, impl="rbg"), (x.shape[0], 3),
                                                     jnp.uint64)),
                      [S((4,), jnp.uint32), S((n,), jnp.float32)]),
    }

    def same(got, want, name):
        if want.dtype.kind == "f" and want.dtype.itemsize == 2 or str(want.dtype) == "bfloat16":
            g, w = got.astype(np.float64), want.astype(np.float64)
            assert np.array_equal(np.isnan(g), np.isnan(w)) and np.array_equal(np.isinf(g), np.isinf(w)), name
            fin = np.isfinite(w)
            assert np.array_equal(g[~fin & ~np.isnan(w)], w[~fin & ~np.isnan(w)]), name
            np.testing.assert_allclose(g[fin], w[fin], rtol=2e-2, atol=1e-2, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)

    def check(target):
        import relax_mlir
        from relax_mlir.targets import CPU_ONLY_PASSES
        for name, (f, specs, *drop) in CASES.items():
            passes = [p for p in relax_mlir.OPTIMIZE_PIPELINE if p not in drop
                      and (target == "cpu" or p not in CPU_ONLY_PASSES)]
            try:
                exe = relax_mlir.compile(from_jax(f, *specs), target=target, passes=passes)
            except relax_mlir.CompileError as e:  # a GPU target's clean refusal of a type it lacks
                if target != "cpu" and f"not supported on {target.capitalize()}" in str(e) and name != "rbg_draws":
                    continue
                raise
            for k in (1, 3, 17):
                rng = np.random.default_rng(k)
                shapes = [tuple(k if not isinstance(d, int) else d for d in s.shape) for s in specs]
                args = [rng.random(sh) < 0.3 if s.dtype == jnp.bool_ else
                        (rng.standard_normal(sh) * (100 if s.dtype.itemsize == 2 else 10)).astype(s.dtype)
                        for s, sh in zip(specs, shapes)]
                if name == "f16_matmul_with_inf":
                    args[0][0, -1] = np.inf
                got, want = exe(*args), jax.jit(f)(*args)
                got = got if isinstance(got, (list, tuple)) else [got]
                want = want if isinstance(want, (list, tuple)) else [want]
                for g, w in zip(got, want):
                    w = np.asarray(w)
                    assert g.shape == w.shape, (name, k, g.shape, w.shape)
                    same(g, w, f"{name} at n = {k}")
""")


def _run(target: str) -> None:
    """In a child process: some of these aborted the process."""
    r = subprocess.run([sys.executable, "-c", CASES + f"\ncheck({target!r})\nprint('ok')"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0 and "ok" in r.stdout, (r.returncode, r.stderr[-3000:])


def test_cpu():
    _run("cpu")


def test_vulkan():
    if not vulkan_adapter():
        pytest.skip("no Vulkan adapter (Debian mesa-vulkan-drivers provides lavapipe)")
    _run("vulkan")
