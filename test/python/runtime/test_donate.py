"""Donated arguments (jax.jit donate_argnums -> `relax.donate`): the result is written into the
argument's own buffer and the call returns that very array, updated in place; numerics against
jax.jit of the same function, where the old value is still read too (the compiler keeps a copy),
and a ValueError naming the argument for every argument that cannot be updated in place."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import relax_mlir
from relax_mlir.frontend.jax import from_jax


def spec(shape, dt=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dt)


def rand(rng, shape, dt=np.float32):
    return rng.standard_normal(shape).astype(dt)


def decode(cache, kv, pos):
    return jax.lax.dynamic_update_slice(cache, kv, (0, pos, 0, 0))


@pytest.fixture(scope="module")
def decode_exe():
    b, m = jax.export.symbolic_shape("b, m")
    mod = from_jax(jax.jit(decode, donate_argnums=(0,)), spec((b, m, 2, 8)), spec((b, 1, 2, 8)), spec((), jnp.int32))
    assert "relax.donate = 0" in str(mod)
    return relax_mlir.compile(mod)


@pytest.mark.parametrize("b,m", [(1, 1), (1, 7), (3, 13), (2, 64)])
def test_decode_step_written_in_place(decode_exe, b, m):
    rng = np.random.default_rng(b * 100 + m)
    # positions inside the cache, at its end, and out of range (jax wraps a negative index once,
    # then clamps the start into [0, m - 1])
    for pos in sorted({0, m // 2, m - 1, m, m + 5, 1000, -1, -m, -m - 3}):
        cache = rand(rng, (b, m, 2, 8))
        kv = rand(rng, (b, 1, 2, 8))
        want = np.asarray(jax.jit(decode)(cache.copy(), kv, np.int32(pos)))
        out = decode_exe(cache, kv, np.int32(pos))
        assert out is cache
        np.testing.assert_array_equal(out, want)


def test_donated_through_from_jax_keyword():
    mod = from_jax(lambda x: x * 2.0 + 1.0, spec((jax.export.symbolic_shape("n")[0], 3)), donate_argnums=(0,))
    exe = relax_mlir.compile(mod)
    for n in (1, 7, 300):
        x = rand(np.random.default_rng(n), (n, 3))
        want = x * 2 + 1
        out = exe(x)
        assert out is x
        np.testing.assert_allclose(out, want, rtol=1e-6)


def test_donation_after_an_unused_argument():
    """jax.export drops an unused argument from @main: the donated one keeps its relax position."""
    def f(unused, cache, kv):
        return jax.lax.dynamic_update_slice(cache, kv, (2, 0))

    n = jax.export.symbolic_shape("n")[0]
    mod = from_jax(jax.jit(f, donate_argnums=(1,)), spec((3,)), spec((n, 4)), spec((1, 4)))
    exe = relax_mlir.compile(mod)
    assert exe.signature().donate == ((1, 0),)
    rng = np.random.default_rng(7)
    for nn in (1, 3, 8):
        cache, kv = rand(rng, (nn, 4)), rand(rng, (1, 4))
        want = np.asarray(jax.jit(f)(np.zeros(3, np.float32), cache.copy(), kv))
        out = exe(np.zeros(3, np.float32), cache, kv)
        assert out is cache
        np.testing.assert_array_equal(out, want)


def test_old_value_still_read_is_kept():
    """The updated cache and a reduction of the OLD cache: the update must not clobber what the
    reduction reads (bufferization keeps a copy here)."""
    def f(cache, kv, pos):
        new = jax.lax.dynamic_update_slice(cache, kv, (0, pos, 0))
        return new, cache.sum(axis=1), cache * 3.0

    b, m = jax.export.symbolic_shape("b, m")
    exe = relax_mlir.compile(from_jax(jax.jit(f, donate_argnums=(0,)), spec((b, m, 4)), spec((b, 1, 4)),
                                      spec((), jnp.int32)))
    rng = np.random.default_rng(0)
    for bb, mm, pos in ((1, 1, 0), (2, 5, 3), (3, 17, 16), (2, 9, 40)):
        cache, kv = rand(rng, (bb, mm, 4)), rand(rng, (bb, 1, 4))
        want = [np.asarray(w) for w in jax.jit(f)(cache.copy(), kv, np.int32(pos))]
        out = exe(cache, kv, np.int32(pos))
        assert out[0] is cache
        for o, w in zip(out, want):
            np.testing.assert_allclose(o, w, rtol=1e-5, atol=1e-6)


def test_old_value_returned_as_another_result():
    def f(cache, kv):
        return jax.lax.dynamic_update_slice(cache, kv, (1, 0)), cache

    n = jax.export.symbolic_shape("n")[0]
    exe = relax_mlir.compile(from_jax(jax.jit(f, donate_argnums=(0,)), spec((n, 4)), spec((1, 4))))
    rng = np.random.default_rng(1)
    for nn in (1, 2, 9):
        cache, kv = rand(rng, (nn, 4)), rand(rng, (1, 4))
        old = cache.copy()
        new, same = exe(cache, kv)
        assert new is cache and same is not cache
        np.testing.assert_array_equal(same, old)
        np.testing.assert_array_equal(new, np.asarray(jax.jit(f)(old.copy(), kv)[0]))


def test_two_caches_and_a_swap():
    """Two donated caches updated in one step; and two donated buffers swapped (each result may
    share storage with the OTHER donated input: copied out before either is written)."""
    def kv_step(k, v, nk, nv, pos):
        return (jax.lax.dynamic_update_slice(k, nk, (0, pos, 0)), jax.lax.dynamic_update_slice(v, nv, (0, pos, 0)),
                (k * v).sum())

    # m bounded: relax-plan-memory sizes the intermediates' storage at the bound (workspace)
    b, m = jax.export.symbolic_shape("b, m", constraints=("m <= 32",))
    exe = relax_mlir.compile(from_jax(jax.jit(kv_step, donate_argnums=(0, 1)), spec((b, m, 4)), spec((b, m, 4)),
                                      spec((b, 1, 4)), spec((b, 1, 4)), spec((), jnp.int32)))
    rng = np.random.default_rng(2)
    for bb, mm, pos in ((1, 1, 0), (2, 6, 5), (3, 11, 20)):
        k, v, nk, nv = rand(rng, (bb, mm, 4)), rand(rng, (bb, mm, 4)), rand(rng, (bb, 1, 4)), rand(rng, (bb, 1, 4))
        want = [np.asarray(w) for w in jax.jit(kv_step)(k.copy(), v.copy(), nk, nv, np.int32(pos))]
        out = exe(k, v, nk, nv, np.int32(pos))
        assert out[0] is k and out[1] is v
        for o, w in zip(out, want):
            np.testing.assert_allclose(o, w, rtol=1e-5, atol=1e-5)

    n = jax.export.symbolic_shape("n")[0]
    swap = relax_mlir.compile(from_jax(jax.jit(lambda x, y: (y, x), donate_argnums=(0, 1)), spec((n, 3)), spec((n, 3))))
    for nn in (1, 5, 64):
        x, y = rand(rng, (nn, 3)), rand(rng, (nn, 3))
        x0, y0 = x.copy(), y.copy()
        a, c = swap(x, y)
        assert a is x and c is y
        np.testing.assert_array_equal(a, y0)
        np.testing.assert_array_equal(c, x0)


def test_bf16_and_int_caches_in_place():
    n = jax.export.symbolic_shape("n")[0]
    for dt in (jnp.bfloat16, jnp.int32, jnp.int8):
        f = jax.jit(lambda c, u, p: jax.lax.dynamic_update_slice(c, u, (p, 0)), donate_argnums=(0,))
        exe = relax_mlir.compile(from_jax(f, spec((n, 4), dt), spec((1, 4), dt), spec((), jnp.int32)))
        npdt = np.dtype(dt)
        for nn, p in ((1, 0), (6, 2), (6, 9)):
            c = (np.arange(nn * 4) % 7).reshape(nn, 4).astype(npdt)
            u = np.full((1, 4), 5).astype(npdt)
            want = np.asarray(jax.jit(lambda c, u, p: jax.lax.dynamic_update_slice(c, u, (p, 0)))(c.copy(), u, p))
            out = exe(c, u, np.int32(p))
            assert out is c
            np.testing.assert_array_equal(out.astype(np.float32), want.astype(np.float32))


# --- what cannot be updated in place is refused, by name --------------------------------------

def test_refused_arguments(decode_exe):
    rng = np.random.default_rng(3)
    kv, pos = rand(rng, (2, 1, 2, 8)), np.int32(1)
    wide = rand(rng, (2, 5, 2, 16))
    with pytest.raises(ValueError, match=r"argument #0 is donated .* must be C-contiguous"):
        decode_exe(wide[..., :8], kv, pos)
    ro = rand(rng, (2, 5, 2, 8))
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"argument #0 is donated .* must be writable"):
        decode_exe(ro, kv, pos)
    with pytest.raises(ValueError, match=r"argument #0 has dtype float64, expected float32"):
        decode_exe(rand(rng, (2, 5, 2, 8), np.float64), kv, pos)
    with pytest.raises(ValueError, match=r"argument #0 is donated .* pass a numpy array, got list"):
        decode_exe(rand(rng, (2, 5, 2, 8)).tolist(), kv, pos)
    one = rand(rng, (1, 5, 2, 8))
    with pytest.raises(ValueError, match=r"argument #0 is donated .* shares memory with argument #1"):
        decode_exe(one, one[:, 1:2], pos)  # the update is a (contiguous) view of the cache itself
    # a non-contiguous view is copied before the call: no hazard, jax's result
    cache = rand(rng, (2, 5, 2, 8))
    want = np.asarray(jax.jit(decode)(cache.copy(), cache[:, 3:4].copy(), pos))
    np.testing.assert_array_equal(decode_exe(cache, cache[:, 3:4], pos), want)
    before = cache.copy()
    with pytest.raises(ValueError, match=r"argument #0 has shape \(2, 5, 2, 9\)"):
        decode_exe(rand(rng, (2, 5, 2, 9)), kv, pos)
    np.testing.assert_array_equal(cache, before)  # nothing ran


def test_subclass_donated_returns_the_callers_object(decode_exe):
    class Tagged(np.ndarray):
        pass

    rng = np.random.default_rng(4)
    cache = rand(rng, (1, 4, 2, 8)).view(Tagged)
    kv = rand(rng, (1, 1, 2, 8))
    want = np.asarray(jax.jit(decode)(np.asarray(cache).copy(), kv, np.int32(2)))
    out = decode_exe(cache, kv, np.int32(2))
    assert out is cache
    np.testing.assert_array_equal(np.asarray(out), want)


# --- the attribute: verified at compile time, located -----------------------------------------

T = '!relax.tensor<["n", 4], f32>'


def donating(attr: str, result_type: str = T, n_results: int = 1) -> str:
    res = ", ".join([result_type] * n_results)
    rets = ", ".join(["%e"] * n_results)
    return (f"func.func @main(%x: {T} {{relax.donate = {attr}}}) -> ({res}) {{\n"
            f'  %e = "relax.exp"(%x) : ({T}) -> {result_type}\n'
            f"  return {rets} : {res}\n}}\n")


@pytest.mark.parametrize("attr,rtype,n,msg", [
    ("1 : i64", T, 1, r"argument #0 \(relax.donate = 1\): the function has 1 results"),
    ('"zero"', T, 1, r"'relax.donate' must be an integer result index"),
    ("0 : i64", '!relax.tensor<["n", 4], f32>', 2, None),
])
def test_bad_attribute_is_a_located_error(attr, rtype, n, msg):
    if msg is None:  # the same result returned twice: donating it once is fine
        exe = relax_mlir.compile(donating(attr, rtype, n))
        x = np.ones((3, 4), np.float32)
        a, b = exe(x)
        assert a is x and b is not x
        np.testing.assert_allclose(b, np.exp(np.ones((3, 4))), rtol=1e-6)
        np.testing.assert_allclose(a, b)
        return
    with pytest.raises(relax_mlir.CompileError, match=r"<string>:1:1: error: .*" + msg):
        relax_mlir.compile(donating(attr, rtype, n))


def test_type_mismatch_is_a_located_error():
    src = f"""func.func @main(%x: {T} {{relax.donate = 0 : i64}}) -> !relax.tensor<["n"], f32> {{
  %s = "relax.sum"(%x) {{axes = [1]}} : ({T}) -> !relax.tensor<["n"], f32>
  return %s : !relax.tensor<["n"], f32>
}}
"""
    with pytest.raises(relax_mlir.CompileError,
                       match=r"<string>:1:1: error: 'func.func' op argument #0 \(relax.donate = 0\): result #0 has type "
                             r'!relax.tensor<\["n"\], f32>, which is not the argument\'s type !relax.tensor<\["n", 4\], f32>'):
        relax_mlir.compile(src)


def test_donated_cpu_artifact_round_trip(tmp_path, decode_exe):
    from relax_mlir.runtime import load

    decode_exe.export(str(tmp_path / "a"))
    exe = load(str(tmp_path / "a"))
    assert exe.signature().donate == ((0, 0),)
    rng = np.random.default_rng(5)
    for b, m, pos in ((1, 3, 1), (2, 8, 11)):
        cache, kv = rand(rng, (b, m, 2, 8)), rand(rng, (b, 1, 2, 8))
        want = np.asarray(jax.jit(decode)(cache.copy(), kv, np.int32(pos)))
        out = exe(cache, kv, np.int32(pos))
        assert out is cache
        np.testing.assert_array_equal(out, want)


# --- GPU runtimes: the host program reads a donated input back into the caller's array ---------

SWAP = """func.func @main(%x: !relax.tensor<["n", 3], f32> {relax.donate = 0 : i64}, %y: !relax.tensor<["n", 3], f32> {relax.donate = 1 : i64}) -> (!relax.tensor<["n", 3], f32>, !relax.tensor<["n", 3], f32>) {
  return %y, %x : !relax.tensor<["n", 3], f32>, !relax.tensor<["n", 3], f32>
}"""


def test_cuda_artifact_donates_through_the_host_program(tmp_path):
    """A swap of two donated buffers is device copies only: the recording driver (no GPU) runs it,
    and each caller array holds the other's old values afterwards."""
    import json

    from recording_driver import RecordingDriver

    from relax_mlir.runtime import load

    exe = relax_mlir.compile(SWAP, target="cuda")
    assert exe.artifacts["hostprog"]["entries"]["main"]["donated"] == [0, 1]
    exe.export(str(tmp_path / "swap"))
    assert json.loads((tmp_path / "swap" / "manifest.json").read_text())["entries"][0]["donate"] == {"0": 0, "1": 1}
    f = load(str(tmp_path / "swap"), driver=RecordingDriver())
    for n in (1, 4, 33):
        x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        y = -x - 1
        x0, y0 = x.copy(), y.copy()
        a, b = f(x, y)
        assert a is x and b is y
        np.testing.assert_array_equal(a, y0)
        np.testing.assert_array_equal(b, x0)


DECODE = """func.func @main(%cache: !relax.tensor<["b", "m", 4, 8], f32> {relax.donate = 0 : i64}, %kv: !relax.tensor<["b", 1, 4, 8], f32>, %pos: !relax.tensor<[], i32>) -> !relax.tensor<["b", "m", 4, 8], f32> {
  %z = "relax.constant"() {value = dense<0> : tensor<i32>} : () -> !relax.tensor<[], i32>
  %r = "relax.dynamic_update_slice"(%cache, %kv, %z, %pos, %z, %z) : (!relax.tensor<["b", "m", 4, 8], f32>, !relax.tensor<["b", 1, 4, 8], f32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>) -> !relax.tensor<["b", "m", 4, 8], f32>
  return %r : !relax.tensor<["b", "m", 4, 8], f32>
}"""


def test_vulkan_decode_step_in_place(tmp_path):
    """Exported for Vulkan, run by `load` in a fresh process (lavapipe; no MLIR there): the cache
    comes back updated in place, rows clamped as StableHLO says."""
    import subprocess
    import sys
    import textwrap

    import toolchecks

    if not toolchecks.vulkan_adapter():
        pytest.skip("wgpu or a Vulkan adapter (lavapipe) is not available")
    relax_mlir.compile(DECODE, target="vulkan").export(str(tmp_path / "decode"))
    script = textwrap.dedent(f"""
        import numpy as np
        from relax_mlir.runtime import load
        exe = load({str(tmp_path / "decode")!r})
        rng = np.random.default_rng(0)
        for b, m, pos in ((1, 1, 0), (2, 7, 3), (3, 5, 9), (1, 6, -2)):
            cache = rng.standard_normal((b, m, 4, 8)).astype(np.float32)
            kv = rng.standard_normal((b, 1, 4, 8)).astype(np.float32)
            want = cache.copy()
            want[:, min(max(pos, 0), m - 1)] = kv[:, 0]
            out = exe(cache, kv, np.int32(pos))
            assert out is cache
            np.testing.assert_array_equal(out, want)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    assert out.stdout.strip().endswith("ok")
