"""First calls (issue 18): what a call at a new shape would set up is set up by compile() or by
`reserve`. Structural checks only (no timing): storage blocks reserved for a shape are not grown by
calls at that shape or smaller, a first call after `reserve` allocates nothing, the building
thread's call buffer exists before its first call, the run-time library's pool is started when a
module that uses it is built; numerics at 0, 1, a prime and a large size from one compile."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import relax_mlir
from relax_mlir.runtime import native_rt


def T(*dims) -> str:
    return "!relax.tensor<[" + ", ".join(f'"{d}"' if isinstance(d, str) else str(d) for d in dims) + "], f32>"


def _src(attrs: str = "") -> str:
    return f"""
func.func @main(%x: {T("n", 16)}, %w: {T(16, 8)}, %b: {T(8)}) -> {T("n", 8)} {attrs} {{
  %m = "relax.matmul"(%x, %w) : ({T("n", 16)}, {T(16, 8)}) -> {T("n", 8)}
  %a = "relax.add"(%m, %b) : ({T("n", 8)}, {T(8)}) -> {T("n", 8)}
  %s = "relax.softmax"(%a) {{axis = -1}} : ({T("n", 8)}) -> {T("n", 8)}
  return %s : {T("n", 8)}
}}"""


def _want(x, w, b):
    a = x.astype(np.float64) @ w + b
    e = np.exp(a - a.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.fixture(scope="module")
def exe():
    return relax_mlir.compile(_src())


def _args(n, seed=0):
    rng = np.random.default_rng(seed + n)
    return (rng.standard_normal((n, 16)).astype(np.float32), rng.standard_normal((16, 8)).astype(np.float32),
            rng.standard_normal(8).astype(np.float32))


def _in_new_thread(fn):
    """Run `fn` in a fresh thread (storage blocks are per thread: each test starts with none)."""
    out, err = [], []

    def run():
        try:
            out.append(fn())
        except BaseException as e:  # re-raised in the test's thread
            err.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if err:
        raise err[0]
    return out[0]


def test_calls_at_reserved_shapes_allocate_nothing(exe):
    f = exe["main"]
    assert [str(w) for w in f.sig.workspace] == ["32*n", "32*n"]  # blocks that grow with n

    def body():
        assert f.workspace_allocations() == 0 and f.workspace_bytes() == 0
        held = exe.reserve({"n": 1009})
        assert held == f.workspace_bytes() >= 2 * 32 * 1009
        allocs = f.workspace_allocations()
        assert allocs == 2
        for n in (1009, 0, 1, 13, 1009, 512):  # the reserved shape and smaller ones
            args = _args(n)
            np.testing.assert_allclose(exe(*args), _want(*args), rtol=1e-4, atol=1e-6, err_msg=f"n={n}")
        grown_before = (f.workspace_allocations(), f.workspace_bytes())
        args = _args(1010)  # larger than reserved: the blocks grow (the counter sees allocations)
        np.testing.assert_allclose(exe(*args), _want(*args), rtol=1e-4, atol=1e-6)
        return allocs, held, grown_before, (f.workspace_allocations(), f.workspace_bytes())

    allocs, held, after_calls, after_growth = _in_new_thread(body)
    assert after_calls == (allocs, held)
    assert after_growth[0] == allocs + 2 and after_growth[1] > held


def test_without_reserve_a_larger_shape_allocates(exe):
    """The counter the test above relies on moves when a call grows a block."""
    f = exe["main"]

    def body():
        counts = []
        for n in (3, 3, 200, 200, 7):
            exe(*_args(n))
            counts.append(f.workspace_allocations())
        return counts

    counts = _in_new_thread(body)
    assert counts[0] == counts[1] == 2 and counts[2] == counts[3] == 4 and counts[4] == 4


def test_reserve_caches_the_binding_and_partial_reserves(exe):
    f = exe["main"]
    x, w, b = _args(37)
    g = f.partial({1: w, 2: b})

    def body():
        assert g.reserve({"n": 37}) == f.workspace_bytes() > 0
        assert (37,) in f._plan.cache and (37,) in g.plan.cache  # no facts computed by the first call
        allocs = f.workspace_allocations()
        np.testing.assert_allclose(g(x), _want(x, w, b), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(f(x, w, b), _want(x, w, b), rtol=1e-4, atol=1e-6)
        return allocs, f.workspace_allocations()

    before, after = _in_new_thread(body)
    assert before == after


def test_reserve_refuses_bad_bindings(exe):
    f = exe["main"]
    with pytest.raises(ValueError, match=r"no entry has symbol 'm' \(symbols: n\)"):
        exe.reserve({"m": 4})
    with pytest.raises(ValueError, match=r"no symbol 'm' in the signature"):
        f.reserve({"m": 4})
    with pytest.raises(ValueError, match=r"n must be an integer, got float"):
        f.reserve({"n": 4.0})
    with pytest.raises(ValueError, match=r"storage sizes need n"):
        f.reserve({})
    with pytest.raises(ValueError, match=r"takes a dict"):
        exe.reserve([("n", 4)])
    with pytest.raises(ValueError, match=r"@main.reserve: no symbol 'm'"):
        exe.reserve({"n": 4, "m": 4}, name="main")
    with pytest.raises(KeyError, match=r"no public function @nope"):
        exe.reserve({"n": 4}, name="nope")
    bounded = relax_mlir.compile(_src("attributes {relax.symbol_bounds = {n = 64}}"))
    with pytest.raises(ValueError, match=r"n = 65 .*exceeds its upper bound 64"):
        bounded.reserve({"n": 65})


def test_small_bounded_storage_is_allocated_at_build():
    """With the symbols' upper bounds the planner sizes the blocks once (constant sizes): the
    building thread holds them after compile() and no call allocates."""
    exe = relax_mlir.compile(_src("attributes {relax.symbol_bounds = {n = 64}}"))
    f = exe["main"]
    assert all(w.is_const for w in f.sig.workspace)
    allocs, held = f.workspace_allocations(), f.workspace_bytes()
    assert allocs == len(f.sig.workspace) and held >= sum(int(w.value) for w in f.sig.workspace)
    for n in (0, 1, 31, 64):
        args = _args(n)
        np.testing.assert_allclose(exe(*args), _want(*args), rtol=1e-4, atol=1e-6, err_msg=f"n={n}")
    assert (f.workspace_allocations(), f.workspace_bytes()) == (allocs, held)


def test_building_thread_has_its_call_buffer_before_the_first_call(exe):
    f = exe["main"]
    st = f._plan.tls.st  # made by compile(), in this (the building) thread
    exe(*_args(5))
    assert f._plan.tls.st is st


@pytest.mark.skipif(not native_rt.available(), reason="relax-mlir's run-time library needs cc and scipy-openblas32")
def test_pool_is_started_when_a_module_using_it_is_built(monkeypatch):
    lib = native_rt.load()
    monkeypatch.setenv("RELAX_MLIR_BLAS_THREADS", "2")
    native_rt.configure(lib)
    try:
        exe = relax_mlir.compile(_src())  # its threaded build runs its parallel loops on the pool
        assert lib.relax_rt_started() >= 2
        args = _args(300)
        np.testing.assert_allclose(exe(*args), _want(*args), rtol=1e-4, atol=1e-6)
    finally:
        monkeypatch.undo()
        native_rt.configure(lib)


def test_prefault_leaves_contents_and_results_alone(exe, monkeypatch):
    """Fresh blocks from PREFAULT_MIN are faulted in by a helper thread with
    madvise(MADV_POPULATE_WRITE) while the call runs: no byte changes (kernels may be writing the
    same pages), and the call's results are those of a call without it."""
    from relax_mlir.runtime import executable

    block = executable._aligned_block(3 * executable.PREFAULT_MIN + 123)
    block[:] = np.arange(block.size, dtype=np.int64).astype(np.int8)
    want = block.copy()
    executable._populate([block])
    np.testing.assert_array_equal(block, want)
    started = []
    real = executable._prefault_in_background
    monkeypatch.setattr(executable, "_prefault_in_background", lambda blocks: (started.append(len(blocks)), real(blocks)))
    n = executable.PREFAULT_MIN // 32 + 7
    got = _in_new_thread(lambda: exe(*_args(n)))
    assert started and started[0] >= 1
    np.testing.assert_allclose(got, _want(*_args(n)), rtol=1e-4, atol=1e-6)
