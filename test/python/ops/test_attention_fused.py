"""relax.attention and relax-fuse-attention: jax attention chains become ONE fused op (checked on
the IR), versioned on a symbolic key length (the unfused chain below SHORT_KEYS, checked on the IR
and on which kernels ran), compiled once and equal to jax.jit at s = 1, a prime, 255, 256, 512 and
2048; NaN/Inf rows as jax gives them (the fused kernel and the short branch); chains that must stay
unfused stay unfused; bad relax.attention IR is refused with a located error."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from mlir import ir

import relax_mlir
from relax_mlir.frontend.jax import from_jax
from relax_mlir.ops.attention import SHORT_KEYS, SHORT_QUERIES

FUSE = ["relax-infer-shapes", "relax-canonicalize", "relax-fuse-attention{min_keys=0 min_queries=0}"]
VERSIONED = ["relax-infer-shapes", "relax-canonicalize", "relax-fuse-attention"]


def _cpu_passes(fuse: str | None) -> list[str]:
    """The CPU pipeline with relax-fuse-attention replaced by `fuse` (None: dropped)."""
    from relax_mlir.targets import registry
    passes = registry().expand(["relax-compile-cpu"])
    assert "relax-fuse-attention" in passes
    return [fuse if p == "relax-fuse-attention" else p for p in passes if fuse is not None or p != "relax-fuse-attention"]


def fused_only(m):
    """`m` compiled for the CPU with relax-fuse-attention{min_keys=0 min_queries=0}: the fused kernel at every length."""
    return relax_mlir.compile(m, passes=_cpu_passes("relax-fuse-attention{min_keys=0 min_queries=0}"))


def unfused_only(m):
    """`m` compiled for the CPU without relax-fuse-attention."""
    return relax_mlir.compile(m, passes=_cpu_passes(None))


def op_names(module) -> list[str]:
    names = []

    def visit(o):
        names.append(o.name)
        return ir.WalkResult.ADVANCE

    with module.context:
        module.op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return names


def causal(n, m=None):
    m = n if m is None else m
    return jnp.arange(n)[:, None] >= jnp.arange(m)[None, :]


def plain(q, k, v):
    return jax.nn.softmax(q @ k.T, axis=-1) @ v


def scaled_div(q, k, v):
    return jax.nn.softmax((q @ k.T) / np.sqrt(q.shape[-1]).astype(np.float32), axis=-1) @ v


def causal_1e9(q, k, v):
    s = (q @ k.T) * 0.125
    return jax.nn.softmax(jnp.where(causal(q.shape[0]), s, -1e9), axis=-1) @ v


def causal_inf(q, k, v):
    s = q @ k.T
    return jax.nn.softmax(jnp.where(causal(q.shape[0]), s, -jnp.inf), axis=-1) @ v


def multi_head(q, k, v):  # [B, H, S, D]
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * 0.125
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)


def multi_head_bshd_causal(q, k, v):  # [B, S, H, D], flax's layout
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / 8.0
    s = jnp.where(causal(q.shape[1]), s, -1e9)
    return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v)


# (function, shapes of q, k, v with "s" the symbolic length)
CASES = [
    (plain, [("s", 64), ("s", 64), ("s", 96)]),
    (scaled_div, [("s", 40), ("s", 40), ("s", 32)]),
    (causal_1e9, [("s", 64), ("s", 64), ("s", 64)]),
    (causal_inf, [("s", 32), ("s", 32), ("s", 64)]),
    (multi_head, [(2, 3, "s", 16), (2, 3, "s", 16), (2, 3, "s", 32)]),
    (multi_head_bshd_causal, [(1, "s", 2, 64), (1, "s", 2, 64), (1, "s", 2, 64)]),
]


def export(f, shapes, sym="s"):
    (s,) = jax.export.symbolic_shape(sym)
    specs = [jax.ShapeDtypeStruct(tuple(s if d == sym else d for d in sh), jnp.float32) for sh in shapes]
    return from_jax(f, *specs)


def concrete(shapes, n):
    return [tuple(n if d == "s" else d for d in sh) for sh in shapes]


@pytest.mark.parametrize("f, shapes", CASES, ids=[c[0].__name__ for c in CASES])
def test_fused_matches_jax(f, shapes):
    m = export(f, shapes)
    names = op_names(relax_mlir.run_passes(m, FUSE))
    assert names.count("relax.attention") == 1
    for gone in ("relax.exp", "relax.max", "relax.sum", "relax.matmul", "relax.where"):
        assert gone not in names, gone
    # the default pipeline versions it: relax_v.if over the unfused chain and the fused op
    versioned = op_names(relax_mlir.run_passes(export(f, shapes), VERSIONED))
    assert versioned.count("relax_v.if") == 1 and versioned.count("relax.attention") == 1
    assert versioned.count("relax.exp") == 1 and versioned.count("relax.matmul") == 2
    exe = relax_mlir.compile(m)
    rng = np.random.default_rng(0)
    jf = jax.jit(f)
    for n in (1, 13, SHORT_KEYS - 1, SHORT_KEYS, 512, 2048):
        args = [rng.standard_normal(sh, dtype=np.float32) for sh in concrete(shapes, n)]
        got = exe(*args)
        want = np.asarray(jf(*args))
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=f"s = {n}")


def test_cross_attention_other_key_length():
    """Sq and Sk are different symbols; the key length runs through 1, a prime, 64 and 200."""
    def cross(q, k, v):
        return jax.nn.softmax((q @ k.T) * 0.25, axis=-1) @ v
    s, t = jax.export.symbolic_shape("s, t")
    m = from_jax(cross, jax.ShapeDtypeStruct((s, 32), jnp.float32), jax.ShapeDtypeStruct((t, 32), jnp.float32),
                 jax.ShapeDtypeStruct((t, 32), jnp.float32))
    assert op_names(relax_mlir.run_passes(m, FUSE)).count("relax.attention") == 1
    exe = relax_mlir.compile(m)
    rng = np.random.default_rng(1)
    for sq, sk in ((1, 1), (7, 61), (33, 64), (65, 200), (3, 129), (5, 256), (40, 301), (1, 700)):
        q = rng.standard_normal((sq, 32), dtype=np.float32)
        k, v = (rng.standard_normal((sk, 32), dtype=np.float32) for _ in range(2))
        np.testing.assert_allclose(exe(q, k, v), np.asarray(jax.jit(cross)(q, k, v)), rtol=2e-5, atol=2e-5)


def test_nan_inf_rows_as_jax():
    """A NaN score makes its row NaN; a row of all -inf scores is NaN (jax.nn.softmax of all -inf);
    +inf in v where p = 0 (a masked key) still gives NaN (0 * inf), as the unfused product does
    (so a causal block cannot skip that key tile);
    a -inf score among finite ones gets p = 0."""
    shapes = [("s", 32), ("s", 32), ("s", 32)]
    exe = fused_only(export(causal_1e9, shapes))
    exe_inf = fused_only(export(causal_inf, shapes))
    exe_plain = fused_only(export(plain, shapes))
    rng = np.random.default_rng(2)
    n = 200  # four key tiles, a partial one
    q, k, v = (rng.standard_normal((n, 32), dtype=np.float32) for _ in range(3))
    # Causal blocks skip the key tiles past their diagonal only where that changes nothing: not
    # with v non-finite there (key 150, masked for rows < 150: 0 * inf = NaN in column 2), nor
    # when a row's max is near the fill (row 2's scores are far below -1e9: its max is the fill
    # and the masked keys get p = 1).
    v[150, 2] = np.inf
    q[2, :] = 0.0
    q[2, 0] = -1e11
    q[3, 0] = np.nan                       # row 3: NaN
    q[5, :] = 0.0
    q[5, 0] = -np.inf                      # row 5: scores -inf * k[:, 0] (+-inf by sign)
    k[:, 0] = np.abs(k[:, 0]) + 0.5        # row 5: all -inf
    q[9, 1] = np.inf                       # row 9: +inf where k[:, 1] > 0, -inf elsewhere
    for e, f in ((exe, causal_1e9), (exe_inf, causal_inf), (exe_plain, plain)):
        got, want = e(q, k, v), np.asarray(jax.jit(f)(q, k, v))
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    # the cases the comparison covers: with fill -inf row 5 is all -inf (NaN); with fill -1e9 its
    # max is -1e9, so p = 1 on the masked keys and 1 * inf reaches column 2
    assert np.isnan(exe_inf(q, k, v)[5]).all() and np.isnan(exe(q, k, v)[3]).all()
    got = exe(q, k, v)
    assert np.isinf(got[5, 2]) and not np.isnan(got[5, np.arange(32) != 2]).any()
    p_zero = [r for r in range(150) if r not in (2, 5)]  # rows 2, 5: p = 1 on the masked keys: inf
    assert np.isnan(got[p_zero, 2]).all() and np.isinf(got[[2, 5], 2]).all() and not np.isnan(got[151:, 2]).any()
    np.testing.assert_allclose(got[2, 3:], v[3:, 3:].mean(axis=0), rtol=1e-4, atol=1e-5)


def test_nan_inf_rows_in_the_short_branch():
    """The same NaN/Inf cases at 200 keys through the default (versioned) compile: the short
    branch, the unfused chain, as jax gives them."""
    shapes = [("s", 32), ("s", 32), ("s", 32)]
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((200, 32), dtype=np.float32) for _ in range(3))
    v[150, 2] = np.inf
    q[3, 0] = np.nan
    q[5, :] = 0.0
    q[5, 0] = -np.inf
    k[:, 0] = np.abs(k[:, 0]) + 0.5
    for f in (causal_1e9, causal_inf, plain):
        got, want = relax_mlir.compile(export(f, shapes))(q, k, v), np.asarray(jax.jit(f)(q, k, v))
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def _ran(exe, args) -> set[str]:
    """The kernels one call of `exe` ran (RELAX_MLIR_PROFILE counters)."""
    from relax_mlir.backend import cpu_profile
    cpu_profile.reset(exe)
    exe(*args)
    return {name for name, (_, calls) in cpu_profile.samples(exe).items() if calls and name != "(entry total)"}


def test_versioned_branch_taken_at_run_time(monkeypatch):
    """One compile: below SHORT_KEYS keys the unfused chain's kernels run (an exp kernel) and not
    the fused one, from it on the fused kernel and none of the chain's; results equal jax.jit and
    the fused-only compile on both sides of the threshold."""
    monkeypatch.setenv("RELAX_MLIR_PROFILE", "1")
    shapes = [("s", 64), ("s", 64), ("s", 64)]
    exe = relax_mlir.compile(export(causal_1e9, shapes))
    fused = fused_only(export(causal_1e9, shapes))
    rng = np.random.default_rng(6)
    runs = {}
    for n in (1, 17, SHORT_KEYS - 1, SHORT_KEYS, SHORT_KEYS + 1, 600):
        args = [rng.standard_normal((n, 64), dtype=np.float32) for _ in range(3)]
        runs[n] = _ran(exe, args)
        want = np.asarray(jax.jit(causal_1e9)(*args))
        np.testing.assert_allclose(exe(*args), want, rtol=2e-5, atol=2e-5, err_msg=f"s = {n}")
        np.testing.assert_allclose(fused(*args), want, rtol=2e-5, atol=2e-5, err_msg=f"s = {n}")
    for n, ran in runs.items():
        short = any("exp" in name for name in ran)
        fused = any(name.endswith("_attention") for name in ran)
        assert (short, fused) == (n < SHORT_KEYS, n >= SHORT_KEYS), (n, sorted(ran))


def test_key_length_expression_versioned():
    """A key length t + 1 (a cache of t keys and the new one): versioned on t + 1 in one compile,
    equal to jax.jit on both sides of the threshold (t + 1 = 255 and 256)."""
    def grown(q, kc, vc, kn, vn):
        k, v = jnp.concatenate([kc, kn]), jnp.concatenate([vc, vn])
        return jax.nn.softmax((q @ k.T) * 0.125, axis=-1) @ v
    (t,) = jax.export.symbolic_shape("t")
    f32 = jnp.float32
    m = from_jax(grown, jax.ShapeDtypeStruct((40, 64), f32), jax.ShapeDtypeStruct((t, 64), f32),
                 jax.ShapeDtypeStruct((t, 64), f32), jax.ShapeDtypeStruct((1, 64), f32), jax.ShapeDtypeStruct((1, 64), f32))
    names = op_names(relax_mlir.run_passes(m, VERSIONED))
    assert names.count("relax_v.if") == 1 and names.count("relax.attention") == 1
    exe = relax_mlir.compile(m)
    rng = np.random.default_rng(8)
    for n in (1, 30, SHORT_KEYS - 2, SHORT_KEYS - 1, 400):
        args = [rng.standard_normal(sh, dtype=np.float32) for sh in ((40, 64), (n, 64), (n, 64), (1, 64), (1, 64))]
        np.testing.assert_allclose(exe(*args), np.asarray(jax.jit(grown)(*args)), rtol=2e-5, atol=2e-5, err_msg=f"t = {n}")


def test_static_key_lengths():
    """Static lengths are decided at compile time: below SHORT_KEYS keys or SHORT_QUERIES queries
    the chain stays unfused, else one relax.attention; no branch either way. All equal jax.jit."""
    rng = np.random.default_rng(7)
    for sq, sk, fused in ((40, 64, False), (40, SHORT_KEYS, True), (SHORT_QUERIES - 1, 600, False)):
        specs = [jax.ShapeDtypeStruct((sq, 32), jnp.float32)] + [jax.ShapeDtypeStruct((sk, 32), jnp.float32)] * 2
        names = op_names(relax_mlir.run_passes(from_jax(scaled_div, *specs), VERSIONED))
        assert "relax_v.if" not in names
        assert names.count("relax.attention") == (1 if fused else 0) and ("relax.exp" in names) != fused
        exe = relax_mlir.compile(from_jax(scaled_div, *specs))
        args = [rng.standard_normal(sp.shape, dtype=np.float32) for sp in specs]
        np.testing.assert_allclose(exe(*args), np.asarray(jax.jit(scaled_div)(*args)), rtol=2e-5, atol=2e-5)


def test_zero_length_is_refused_or_empty():
    """s = 0 is below the export's lower bound (jax symbols are >= 1): a ValueError, no crash."""
    exe = relax_mlir.compile(export(plain, [("s", 64), ("s", 64), ("s", 96)]))
    with pytest.raises(ValueError):
        exe(*(np.zeros((0, d), np.float32) for d in (64, 64, 96)))


def T(dims, dt="f32"):
    return "!relax.tensor<[" + ", ".join(f'"{d}"' if isinstance(d, str) else str(d) for d in dims) + f"], {dt}>"


def direct(qd, kd, vd, rd, attrs="", dt="f32"):
    return (f"func.func @main(%q: {T(qd, dt)}, %k: {T(kd, dt)}, %v: {T(vd, dt)}) -> {T(rd, dt)} {{\n"
            f'  %r = "relax.attention"(%q, %k, %v) {attrs} : ({T(qd, dt)}, {T(kd, dt)}, {T(vd, dt)}) -> {T(rd, dt)}\n'
            f"  return %r : {T(rd, dt)}\n}}\n")


def test_direct_op_zero_keys_and_queries():
    """relax.attention written by hand with symbolic lengths that may be 0: Sk = 0 gives zeros
    (the empty sum of the unfused product), Sq = 0 an empty result."""
    exe = relax_mlir.compile(direct(["n", 32], ["m", 32], ["m", 32], ["n", 32], '{scale = 0.5 : f32}'))
    out = exe(np.ones((5, 32), np.float32), np.zeros((0, 32), np.float32), np.zeros((0, 32), np.float32))
    np.testing.assert_array_equal(out, np.zeros((5, 32), np.float32))
    out = exe(np.ones((0, 32), np.float32), np.ones((3, 32), np.float32), np.ones((3, 32), np.float32))
    assert out.shape == (0, 32)


@pytest.mark.parametrize("text, msg", [
    (direct(["n", 32], ["n", 32], ["n", 32], ["n", 32], dt="f16"), "f32 only"),
    (direct(["n", 32], ["n", 16], ["n", 32], ["n", 32]), "head dims of q and k differ"),
    (direct([2, "n", 32], [3, "n", 32], [3, "n", 32], [2, "n", 32]), "batch dim 0"),
    (direct(["n", 32], ["n", 32], ["n", 32], ["n", 32], '{scale = 1.0 : f32, divisor = 2.0 : f32}'), "exclude"),
    (direct(["n", 32], ["n", 32], ["n", 32], ["n", 32], '{mask = "upper"}'), "mask"),
])
def test_direct_op_refused(text, msg):
    with pytest.raises(relax_mlir.CompileError, match=msg):
        relax_mlir.compile(text)


def test_not_fused_when_score_used_twice_or_other_axis():
    def twice(q, k, v):
        s = q @ k.T
        return jax.nn.softmax(s, axis=-1) @ v + s[:, :1]

    def other_axis(q, k, v):
        return jax.nn.softmax(q @ k.T, axis=0) @ v

    for f in (twice, other_axis):
        m = export(f, [("s", 32), ("s", 32), ("s", 32)])
        names = op_names(relax_mlir.run_passes(m, FUSE))
        assert "relax.attention" not in names and "relax.exp" in names, f.__name__
        exe = relax_mlir.compile(m)
        rng = np.random.default_rng(3)
        args = [rng.standard_normal((13, 32), dtype=np.float32) for _ in range(3)]
        np.testing.assert_allclose(exe(*args), np.asarray(jax.jit(f)(*args)), rtol=2e-5, atol=2e-5)


def test_f16_chain_stays_unfused():
    def f(q, k, v):
        return jax.nn.softmax(q @ k.T, axis=-1) @ v
    (s,) = jax.export.symbolic_shape("s")
    m = from_jax(f, *[jax.ShapeDtypeStruct((s, 32), jnp.float16)] * 3)
    assert "relax.attention" not in op_names(relax_mlir.run_passes(m, FUSE))


def test_expanded_chain_matches_fused_and_compiles_for_gpus():
    """relax-expand-attention (the GPU targets' pipelines and relax-lower) gives the unfused chain,
    equal to the fused kernel; Vulkan and CUDA compile a hand-written relax.attention."""
    text = direct([2, "n", 32], [2, "n", 32], [2, "n", 64], [2, "n", 64],
                  '{divisor = 4.0 : f32, mask = "causal", fill = -1.0e9 : f32}')
    expanded = relax_mlir.run_passes(text, ["relax-infer-shapes", "relax-expand-attention", "relax-infer-shapes"])
    names = op_names(expanded)
    assert "relax.attention" not in names and names.count("relax.matmul") == 2 and "relax.where" in names
    fused, unfused = relax_mlir.compile(text), relax_mlir.compile(expanded)
    lowered = relax_mlir.compile(text, optimize=False)
    rng = np.random.default_rng(4)
    for n in (1, 13, 70):
        q, k = (rng.standard_normal((2, n, 32), dtype=np.float32) for _ in range(2))
        v = rng.standard_normal((2, n, 64), dtype=np.float32)
        want = unfused(q, k, v)
        np.testing.assert_allclose(fused(q, k, v), want, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(lowered(q, k, v), want, rtol=2e-5, atol=2e-5)
    for target in ("vulkan", "cuda"):
        assert relax_mlir.compile(text, target=target) is not None


def test_versioned_program_as_artifact(tmp_path):
    """The versioned program exported as a CPU artifact and loaded back runs both branches (s = 13
    and s = 300) equal to jax.jit."""
    from relax_mlir.runtime import load
    shapes = [("s", 32), ("s", 32), ("s", 32)]
    exe = relax_mlir.compile(export(causal_1e9, shapes))
    exe.export(str(tmp_path / "att"))
    art = load(str(tmp_path / "att"))
    rng = np.random.default_rng(9)
    for n in (13, 300):
        args = [rng.standard_normal((n, 32), dtype=np.float32) for _ in range(3)]
        np.testing.assert_allclose(art(*args), np.asarray(jax.jit(causal_1e9)(*args)), rtol=2e-5, atol=2e-5)


def test_direct_op_symbolic_batch_rank4_written_in_place():
    """Rank 4 with a symbolic batch dim: the kernel writes its [b, 3, n, 64] output in place (the
    task's batch index split over b and 3) and equals the unfused chain; causal at n = 5 and 300."""
    text = direct(["b", 3, "n", 32], ["b", 3, "n", 32], ["b", 3, "n", 64], ["b", 3, "n", 64],
                  '{scale = 0.2 : f32, mask = "causal"}')
    fused = relax_mlir.compile(text)
    unfused = relax_mlir.compile(relax_mlir.run_passes(text, ["relax-infer-shapes", "relax-expand-attention",
                                                              "relax-infer-shapes"]))
    rng = np.random.default_rng(10)
    for b, n in ((2, 5), (1, 300), (3, 70)):
        q, k = (rng.standard_normal((b, 3, n, 32), dtype=np.float32) for _ in range(2))
        v = rng.standard_normal((b, 3, n, 64), dtype=np.float32)
        np.testing.assert_allclose(fused(q, k, v), unfused(q, k, v), rtol=2e-5, atol=2e-5, err_msg=f"b={b} n={n}")


CHAIN = """func.func @main(%q: !relax.tensor<["n", 32], f32>, %k: !relax.tensor<["m", 32], f32>, %v: !relax.tensor<["m", 32], f32>) -> !relax.tensor<["n", 32], f32> {
  %kt = "relax.permute_dims"(%k) {axes = [1, 0]} : (!relax.tensor<["m", 32], f32>) -> !relax.tensor<[32, "m"], f32>
  %s = "relax.matmul"(%q, %kt) : (!relax.tensor<["n", 32], f32>, !relax.tensor<[32, "m"], f32>) -> !relax.tensor<["n", "m"], f32>
  %mx = "relax.max"(%s) {axes = [1], keepdims = true} : (!relax.tensor<["n", "m"], f32>) -> !relax.tensor<["n", 1], f32>
  %d = "relax.subtract"(%s, %mx) : (!relax.tensor<["n", "m"], f32>, !relax.tensor<["n", 1], f32>) -> !relax.tensor<["n", "m"], f32>
  %e = "relax.exp"(%d) : (!relax.tensor<["n", "m"], f32>) -> !relax.tensor<["n", "m"], f32>
  %sum = "relax.sum"(%e) {axes = [1], keepdims = true} : (!relax.tensor<["n", "m"], f32>) -> !relax.tensor<["n", 1], f32>
  %p = "relax.divide"(%e, %sum) : (!relax.tensor<["n", "m"], f32>, !relax.tensor<["n", 1], f32>) -> !relax.tensor<["n", "m"], f32>
  %o = "relax.matmul"(%p, %v) : (!relax.tensor<["n", "m"], f32>, !relax.tensor<["m", 32], f32>) -> !relax.tensor<["n", 32], f32>
  return %o : !relax.tensor<["n", 32], f32>
}
"""


def test_few_queries_take_the_chain(monkeypatch):
    """Cross-attention with a symbolic query length over 600 keys: below SHORT_QUERIES rows the
    unfused chain runs, from it on the fused kernel (profile counters); equal to jax.jit."""
    monkeypatch.setenv("RELAX_MLIR_PROFILE", "1")

    def cross(q, k, v):
        return jax.nn.softmax((q @ k.T) * 0.25, axis=-1) @ v
    s, t = jax.export.symbolic_shape("s, t")
    m = from_jax(cross, jax.ShapeDtypeStruct((s, 32), jnp.float32), jax.ShapeDtypeStruct((t, 32), jnp.float32),
                 jax.ShapeDtypeStruct((t, 32), jnp.float32))
    exe = relax_mlir.compile(m)
    rng = np.random.default_rng(15)
    for sq in (1, SHORT_QUERIES - 1, SHORT_QUERIES, 100):
        args = [rng.standard_normal((n, 32), dtype=np.float32) for n in (sq, 600, 600)]
        ran = _ran(exe, args)
        fused = any(name.endswith("_attention") for name in ran)
        assert fused == (sq >= SHORT_QUERIES) and any("exp" in n for n in ran) != fused, (sq, sorted(ran))
        np.testing.assert_allclose(exe(*args), np.asarray(jax.jit(cross)(*args)), rtol=2e-5, atol=2e-5)


def test_versioned_zero_keys_as_the_chain():
    """A hand-written chain whose key length m may be 0 (no lower bound): the versioned program
    gives what the unfused chain gives (the fused-only compile agrees where m > 0; at m = 0 both
    give the empty sum's zeros), and equals numpy at m = 5 and 300."""
    exe, fused, unfused = relax_mlir.compile(CHAIN), fused_only(CHAIN), unfused_only(CHAIN)
    assert "relax_v.if" in op_names(relax_mlir.run_passes(CHAIN, VERSIONED))
    rng = np.random.default_rng(11)
    q = rng.standard_normal((7, 32), dtype=np.float32)
    z = np.zeros((0, 32), np.float32)
    np.testing.assert_array_equal(exe(q, z, z), unfused(q, z, z))
    np.testing.assert_array_equal(fused(q, z, z), np.zeros((7, 32), np.float32))
    for m in (5, 300):
        k, v = (rng.standard_normal((m, 32), dtype=np.float32) for _ in range(2))
        s = q @ k.T
        p = np.exp(s - s.max(-1, keepdims=True))
        want = (p / p.sum(-1, keepdims=True)) @ v
        for e in (exe, fused):
            np.testing.assert_allclose(e(q, k, v), want, rtol=2e-5, atol=2e-5, err_msg=f"m = {m}")


@pytest.mark.parametrize("dt", [jnp.float16, jnp.bfloat16])
def test_low_precision_chain_unfused_and_exact_as_before(dt):
    """f16 / bf16 chains are never fused nor versioned (the kernel is f32): one compile equals
    jax.jit at 1, 13 and 300 keys within the type's rounding."""
    def f(q, k, v):
        return jax.nn.softmax((q @ k.T) * 0.125, axis=-1) @ v
    (s,) = jax.export.symbolic_shape("s")
    m = from_jax(f, *[jax.ShapeDtypeStruct((s, 32), dt)] * 3)
    names = op_names(relax_mlir.run_passes(m, VERSIONED))
    assert "relax.attention" not in names and "relax_v.if" not in names
    exe = relax_mlir.compile(from_jax(f, *[jax.ShapeDtypeStruct((s, 32), dt)] * 3))
    rng = np.random.default_rng(12)
    tol = 2e-2 if dt == jnp.bfloat16 else 4e-3
    for n in (1, 13, 300):
        args = [jnp.asarray(rng.standard_normal((n, 32), dtype=np.float32), dt) for _ in range(3)]
        got = np.asarray(exe(*[np.asarray(a) for a in args]), np.float32)
        np.testing.assert_allclose(got, np.asarray(jax.jit(f)(*args), np.float32), rtol=tol, atol=tol, err_msg=f"s = {n}")


def gqa(q, k, v):
    """Grouped-query attention as transformers' Flax Llama repeats the KV heads: q [b, s, 8, 32]
    over k, v [b, m, 2, 32] (no mask)."""
    k, v = jnp.repeat(k, 4, axis=2), jnp.repeat(v, 4, axis=2)
    w = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.float32(np.sqrt(32)), axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", w, v)


@pytest.mark.parametrize("queries", [1, "s"])
def test_grouped_query_attention_fused(queries):
    """After ops/grouped.py's canonicalization the products run on [b, 2, 4*s, 32] rows and the
    softmax on a [b, 8, s, m] view: one relax.attention on the products' layout (the KV heads
    never repeated), versioned on m and 4*s; equal to jax.jit from one compile on both sides of
    both thresholds (4*s = 28 / 32 / 36 rows, m = 255 / 256), decode (s = 1) and prefill."""
    b, s, m = jax.export.symbolic_shape("b, s, m")
    sq = 1 if queries == 1 else s
    specs = [jax.ShapeDtypeStruct((b, sq, 8, 32), jnp.float32)] + [jax.ShapeDtypeStruct((b, m, 2, 32), jnp.float32)] * 2
    text = str(relax_mlir.run_passes(from_jax(gqa, *specs), FUSE))
    assert text.count('"relax.attention"') == 1 and '"relax.exp"' not in text and '"relax.matmul"' not in text
    assert '!relax.tensor<["b", 2, "m", 32], f32>) -> !relax.tensor<["b", 2, ' in text  # unrepeated k, v
    names = op_names(relax_mlir.run_passes(from_jax(gqa, *specs), VERSIONED))
    if queries == 1:  # a decode step: 4 rows per KV head, below SHORT_QUERIES: unfused
        assert "relax_v.if" not in names and "relax.attention" not in names
    else:  # versioned on m (< SHORT_KEYS) or 4*s (< SHORT_QUERIES)
        assert names.count("relax_v.if") == 1 and names.count("relax.attention") == 1
        assert names.count("relax.logical_or") == 1
    exe = relax_mlir.compile(from_jax(gqa, *specs))
    rng = np.random.default_rng(13)
    for bb, ss, mm in ((1, 1, 1), (2, 5, 13), (1, 3, SHORT_KEYS - 1), (2, 1, SHORT_KEYS), (1, 7, 300),
                       (1, 8, 300), (2, 9, SHORT_KEYS)):
        ss = 1 if queries == 1 else ss
        args = [rng.standard_normal(sh, dtype=np.float32) for sh in ((bb, ss, 8, 32), (bb, mm, 2, 32), (bb, mm, 2, 32))]
        np.testing.assert_allclose(exe(*args), np.asarray(jax.jit(gqa)(*args)), rtol=2e-5, atol=2e-5,
                                   err_msg=f"b={bb} s={ss} m={mm}")


def test_grouped_query_with_causal_mask_stays_unfused():
    """A causal mask over the [s, m] view indexes rows of S, not the products' R*S rows: unfused."""
    def gqa_causal(q, k, v):
        k, v = jnp.repeat(k, 4, axis=2), jnp.repeat(v, 4, axis=2)
        w = jnp.einsum("bqhd,bkhd->bhqk", q, k) * 0.125
        w = jnp.where(causal(q.shape[1], k.shape[1]), w, -1e9)
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(w, axis=-1), v)
    (s,) = jax.export.symbolic_shape("s")
    specs = [jax.ShapeDtypeStruct((1, s, 8, 32), jnp.float32)] + [jax.ShapeDtypeStruct((1, s, 2, 32), jnp.float32)] * 2
    names = op_names(relax_mlir.run_passes(from_jax(gqa_causal, *specs), FUSE))
    assert "relax.attention" not in names and "relax.exp" in names
    exe = relax_mlir.compile(from_jax(gqa_causal, *specs))
    rng = np.random.default_rng(14)
    for n in (1, 9, 300):
        args = [rng.standard_normal(sh, dtype=np.float32) for sh in ((1, n, 8, 32), (1, n, 2, 32), (1, n, 2, 32))]
        np.testing.assert_allclose(exe(*args), np.asarray(jax.jit(gqa_causal)(*args)), rtol=2e-5, atol=2e-5)
