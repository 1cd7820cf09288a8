"""The differential fuzzer in CI: a fixed seed set of random JAX programs (fuzz/gen.py), each
exported with symbolic dims, compiled ONCE with the full pipeline and once with one optional pass
removed (round robin over the seeds, so every pass is removed for many programs), run at several
bindings of its symbols and compared with jax.jit (fuzz/campaign.py says how).

The programs run in worker processes, one per batch (a crash or a hang is that program's
failure; the rest of the batch still runs).  Each batch is one test; its failure message lists
every failing seed with a minimal, self-contained repro.

Settings (`make fuzz` runs the same code with larger values):
    RELAX_MLIR_FUZZ_PROGRAMS     CPU programs, seeds FIRST_SEED ... (default 20)
    RELAX_MLIR_FUZZ_V2_PROGRAMS  CPU programs from seed gen.V2_FIRST_SEED, whose generator adds
                                 cumulative scans, pooling and padding (default 10)
    RELAX_MLIR_FUZZ_V3_PROGRAMS  CPU programs from seed gen.V3_FIRST_SEED, whose generator adds
                                 unsigned integers, bitwise ops and shifts, sorting and
                                 arg-reductions (default 10)
    RELAX_MLIR_FUZZ_V4_PROGRAMS  CPU programs from seed gen.V4_FIRST_SEED, whose generator adds
                                 bitwise and / or / xor reductions (default 10)
    RELAX_MLIR_FUZZ_V5_PROGRAMS  CPU programs from seed gen.V5_FIRST_SEED, whose generator adds
                                 convolutions (default 10)
    RELAX_MLIR_FUZZ_V6_PROGRAMS  CPU programs from seed gen.V6_FIRST_SEED, whose generator adds
                                 scatters, dynamic slices and updates, loops and branches
                                 (default 10)
    RELAX_MLIR_FUZZ_V7_PROGRAMS  CPU programs from seed gen.V7_FIRST_SEED, whose generator adds
                                 complex arithmetic inside the program (default 10)
    RELAX_MLIR_FUZZ_V8_PROGRAMS  CPU programs from seed gen.V8_FIRST_SEED, whose generator adds
                                 complex arguments and results (default 10)
    RELAX_MLIR_FUZZ_V9_PROGRAMS  CPU programs from seed gen.V9_FIRST_SEED, whose generator adds
                                 complex sin, cos, tan, tanh, log1p, expm1, rsqrt, sigmoid and
                                 powers (default 5)
    RELAX_MLIR_FUZZ_V10_PROGRAMS CPU programs from seed gen.V10_FIRST_SEED, whose generator adds
                                 values computed the long way round to themselves (x + 0,
                                 where(c, where(c, x, 0), x), casts there and back), kernels
                                 that canonicalization folds into views (default 5)
    RELAX_MLIR_FUZZ_V11_PROGRAMS CPU programs from seed gen.V11_FIRST_SEED, whose generator adds
                                 the elementwise functions no other family draws (inverse trig
                                 and hyperbolic functions, lgamma, erf_inv, rounding modes,
                                 atan2, hypot, nextafter, sign bits) (default 5)
    RELAX_MLIR_FUZZ_V12_PROGRAMS CPU programs from seed gen.V12_FIRST_SEED, whose generator adds
                                 dense linear algebra on well-conditioned matrices (cholesky,
                                 solve, inv, slogdet, eigvalsh, singular values, QR, triangular
                                 and tridiagonal solves) (default 4)
    RELAX_MLIR_FUZZ_V13_PROGRAMS CPU programs from seed gen.V13_FIRST_SEED, whose generator adds
                                 data-dependent selection and indexing (top_k, searchsorted,
                                 segment reductions, bincount, nonzero / unique with a size,
                                 while loops on the data, bitcasts, reduce_precision, masked
                                 softmax, mixed-precision dots) (default 5)
    RELAX_MLIR_FUZZ_VULKAN       how many of them also run on Vulkan / lavapipe (default 20)
    RELAX_MLIR_FUZZ_FIRST_SEED   the first seed (default 0)
    RELAX_MLIR_FUZZ_BATCH        programs per batch / worker process (default 25)
    RELAX_MLIR_FUZZ_ALL_VARIANTS 1: compile every program once per removed pass (default 0)
"""
import os

import pytest

pytest.importorskip("jax")

from fuzz import campaign  # noqa: E402

PROGRAMS = int(os.environ.get("RELAX_MLIR_FUZZ_PROGRAMS", "20"))
V2_PROGRAMS = int(os.environ.get("RELAX_MLIR_FUZZ_V2_PROGRAMS", "10"))
V3_PROGRAMS = int(os.environ.get("RELAX_MLIR_FUZZ_V3_PROGRAMS", "10"))
V4_PROGRAMS = int(os.environ.get("RELAX_MLIR_FUZZ_V4_PROGRAMS", "10"))
V5_PROGRAMS = int(os.environ.get("RELAX_MLIR_FUZZ_V5_PROGRAMS", "10"))
V6_PROGRAMS = int(os.environ.get("RELAX_MLIR_FUZZ_V6_PROGRAMS", "10"))
V7_PROGRAMS = int(os.environ.get("RELAX_MLIR_FUZZ_V7_PROGRAMS", "10"))
V8_PROGRAMS = int(os.environ.get("RELAX_MLIR_FUZZ_V8_PROGRAMS", "10"))
V9_PROGRAMS = int(os.environ.get("RELAX_MLIR_FUZZ_V9_PROGRAMS", "5"))
V10_PROGRAMS = int(os.environ.get("RELAX_MLIR_FUZZ_V10_PROGRAMS", "5"))
V11_PROGRAMS = int(os.environ.get("RELAX_MLIR_FUZZ_V11_PROGRAMS", "5"))
V12_PROGRAMS = int(os.environ.get("RELAX_MLIR_FUZZ_V12_PROGRAMS", "4"))
V13_PROGRAMS = int(os.environ.get("RELAX_MLIR_FUZZ_V13_PROGRAMS", "5"))
VULKAN = int(os.environ.get("RELAX_MLIR_FUZZ_VULKAN", "20"))
FIRST = int(os.environ.get("RELAX_MLIR_FUZZ_FIRST_SEED", "0"))
BATCH = int(os.environ.get("RELAX_MLIR_FUZZ_BATCH", "25"))
ALL_VARIANTS = os.environ.get("RELAX_MLIR_FUZZ_ALL_VARIANTS", "0") == "1"


def _batches(n, first=FIRST):
    seeds = list(range(first, first + n))
    return [seeds[i:i + BATCH] for i in range(0, len(seeds), BATCH)]


def _v2_first():
    from fuzz import gen

    return gen.V2_FIRST_SEED


def _v3_first():
    from fuzz import gen

    return gen.V3_FIRST_SEED


def _v4_first():
    from fuzz import gen

    return gen.V4_FIRST_SEED


def _v5_first():
    from fuzz import gen

    return gen.V5_FIRST_SEED


def _v6_first():
    from fuzz import gen

    return gen.V6_FIRST_SEED


def _v7_first():
    from fuzz import gen

    return gen.V7_FIRST_SEED


def _v8_first():
    from fuzz import gen

    return gen.V8_FIRST_SEED


def _v9_first():
    from fuzz import gen

    return gen.V9_FIRST_SEED


def _v10_first():
    from fuzz import gen

    return gen.V10_FIRST_SEED


def _v11_first():
    from fuzz import gen

    return gen.V11_FIRST_SEED


def _v12_first():
    from fuzz import gen

    return gen.V12_FIRST_SEED


def _v13_first():
    from fuzz import gen

    return gen.V13_FIRST_SEED


def _check(seeds, target):
    results = campaign.run_batch(seeds, target, all_variants=ALL_VARIANTS)
    assert [r["seed"] for r in results] == list(seeds)
    bad = [r for r in results if r["status"] == "fail"]
    gen_bugs = [r for r in results if r["status"] == "generator"]
    msg = []
    if bad:
        msg.append(f"{len(bad)} of {len(seeds)} programs differ from jax.jit or crash on {target}:")
        msg += [campaign.describe(r) for r in bad]
    if gen_bugs:
        msg.append(f"{len(gen_bugs)} programs the generator should not have written (a fuzzer bug):")
        msg += [f"seed {r['seed']}: {r['detail']}" for r in gen_bugs]
    assert not msg, "\n".join(msg)
    # the generator writes programs the importer takes: at most a few hit an unsupported form
    # a GPU target may refuse an element type it lacks (f64 on Vulkan) with a clean CompileError
    # naming it; most programs must still run there
    refused = [r for r in results if r["status"] == "refused"]
    assert len(refused) <= len(seeds) // 2, "\n".join(f"seed {r['seed']}: {r['detail']}" for r in refused)
    unsupported = [r for r in results if r["status"] == "unsupported"]
    assert len(unsupported) <= max(2, len(seeds) // 10), "\n".join(f"seed {r['seed']}: {r['detail']}"
                                                                  for r in unsupported)


@pytest.mark.parametrize("seeds", _batches(PROGRAMS) + _batches(V2_PROGRAMS, _v2_first())
                         + _batches(V3_PROGRAMS, _v3_first()) + _batches(V4_PROGRAMS, _v4_first())
                         + _batches(V5_PROGRAMS, _v5_first()) + _batches(V6_PROGRAMS, _v6_first())
                         + _batches(V7_PROGRAMS, _v7_first()) + _batches(V8_PROGRAMS, _v8_first())
                         + _batches(V9_PROGRAMS, _v9_first()) + _batches(V10_PROGRAMS, _v10_first())
                         + _batches(V11_PROGRAMS, _v11_first()) + _batches(V12_PROGRAMS, _v12_first())
                         + _batches(V13_PROGRAMS, _v13_first()),
                         ids=lambda s: f"seeds{s[0]}-{s[-1]}")
def test_fuzz_cpu(seeds):
    """Every program of the batch matches jax.jit on the CPU, with the full pipeline and without
    the seed's removed pass, at every binding; no crash, no hang."""
    _check(seeds, "cpu")


@pytest.mark.parametrize("seeds", _batches(min(VULKAN, PROGRAMS)), ids=lambda s: f"seeds{s[0]}-{s[-1]}")
def test_fuzz_vulkan(seeds):
    """The first RELAX_MLIR_FUZZ_VULKAN programs on Vulkan (lavapipe, in the worker process)."""
    import toolchecks

    if not toolchecks.vulkan_adapter():
        pytest.skip("no Vulkan adapter (wgpu + lavapipe)")
    _check(seeds, "vulkan")


def test_every_optional_pass_is_removed_in_the_seed_set():
    """The CI seed set removes each optional pass of OPTIMIZE_PIPELINE for many programs."""
    seeds = range(FIRST, FIRST + PROGRAMS)
    opt = campaign.optional_passes("cpu")
    assert set(opt) >= {"relax-canonicalize", "relax-fuse-kernels", "relax-plan-memory"}
    removed = [campaign.variants(s, "cpu", False)[1] for s in seeds]
    for p in opt:
        assert removed.count(p) >= PROGRAMS // (2 * len(opt)), p


def test_order_dependent_sums_match_only_non_finite_against_non_finite():
    """A float sum that overflows or adds infinities of both signs has an order- and FMA-dependent
    non-finite value (seed 732045: bf16 `a @ a`, jax.jit gives inf where IEEE's unfused sum gives
    nan); the comparison accepts those, and nothing else."""
    import numpy as np

    want = np.array([np.inf, np.nan, -np.inf, 1.0, np.inf], np.float32)
    got = np.array([np.nan, np.inf, np.inf, 1.0, np.inf], np.float32)
    assert campaign.compare(got, want, exact=False, order_dependent=True) is None
    assert "3 of 5" in campaign.compare(got, want, exact=False)
    for g, w in [(1.0, np.nan), (np.nan, 1.0), (np.inf, 3.0e38), (2.0, 1.0)]:
        assert campaign.compare(np.float32([g]), np.float32([w]), exact=False, order_dependent=True)
    # which programs count as order-dependent: by what their outputs went through
    from fuzz import gen

    progs = [gen.generate(s) for s in range(200)]
    dot = next(p for p in progs if p.families[int(p.outputs[0][1:])] == "dot"
               and gen.is_float(p.values[p.outputs[0]].dtype))
    assert dot.order_dependent_outputs()[0]
    plain = next(p for p in progs if not ({"dot", "norm", "reduce"} & set(p.families)))
    assert not any(plain.order_dependent_outputs())


def test_normalized_outputs_are_judged_against_unit_scale():
    """A layer norm of a constant row is rounding noise on both sides (seed 1312036: 1e-14 values
    10% apart); normalized outputs compare against a scale of at least 1, and only they do."""
    import numpy as np
    from fuzz import gen

    want = np.full(6, -9.706718503154604e-15)
    got = np.full(6, -8.777083671441752e-15)
    assert campaign.compare(got, want, exact=False, unit_scale=True) is None
    assert "6 of 6" in campaign.compare(got, want, exact=False)
    assert campaign.compare(np.float64([0.5]), np.float64([0.25]), exact=False, unit_scale=True)
    progs = [gen.generate(s) for s in range(300)]
    kinds = {}
    for p in progs:
        exprs = dict(p.stmts)
        for o, u in zip(p.outputs, p.unit_scale_outputs()):
            if o in exprs and p.families[int(o[1:])] == "norm":
                kinds.setdefault(exprs[o].startswith("jax.nn.log_softmax"), set()).add(u)
    assert kinds.get(False) == {True} and kinds.get(True) == {False}, kinds
    # a sum of layer-normed values (seed 1900032) is judged against 1 too; a product is not
    summed = gen.generate(1900032)
    assert summed.unit_scale_outputs() == [True, False, False], summed.source()


def test_subnormal_results_compare_as_zero_when_inexact():
    """XLA on CPU flushes subnormal results to zero; IEEE arithmetic keeps them (seed 1800154: a
    product of 1156 doubles, -7.3e-316 against jax's -0.0). Inexact values below the smallest
    normal compare as zeros; exact ones and normal values still compare as they are."""
    import numpy as np

    assert campaign.compare(np.float64([-7.33159466e-316]), np.float64([-0.0]), exact=False) is None
    assert campaign.compare(np.float32([1e-39, 2.0]), np.float32([0.0, 2.0]), exact=False) is None
    assert campaign.compare(np.float64([-7.33159466e-316]), np.float64([-0.0]), exact=True)
    assert campaign.compare(np.float32([1.2e-38]), np.float32([0.0]), exact=False)  # a normal number


def test_reference_min_max_propagate_nan():
    """The comparison's reference follows the spec where XLA does not (seed 2200167: XLA's CPU
    min over the minor axis of a [16, 16, 16] array drops the NaN first in each row; numpy and
    StableHLO's `minimum` propagate it): its min/max reductions give numpy's answer, with and
    without keepdims, axis and initial, and leave integer reductions alone."""
    import jax
    import numpy as np
    from fuzz import gen

    src = ("def f(a, i):\n"
           "    return (jnp.min(a, axis=2), jnp.max(a, axis=2, keepdims=True), jnp.min(a, initial=jnp.inf),\n"
           "            jnp.max(a, axis=(0, 2)), jnp.min(i, axis=1), jnp.sum(a, axis=2))\n")
    ns = {"jax": jax, "jnp": gen.SpecJnp(jax.numpy), "np": np}
    exec(src, ns)  # noqa: S102
    a = np.ones((16, 16, 16), np.float32)
    a[..., 0] = np.nan
    a[3, 4, 5] = -np.inf
    i = np.arange(16 * 16 * 16, dtype=np.int32).reshape(16, 16, 16)
    got = [np.asarray(x) for x in jax.jit(ns["f"])(a, i)]
    want = [np.min(a, axis=2), np.max(a, axis=2, keepdims=True), np.min(a, initial=np.inf),
            np.max(a, axis=(0, 2)), np.min(i, axis=1), np.sum(a, axis=2)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    prog = gen.generate(2200167)
    assert "jnp.min(" in prog.source() and gen.SpecJnp.__name__ in repr(prog.function(reference=True).__globals__["jnp"])


def test_subnormals_compare_in_xla_mode():
    """XLA on CPU treats subnormal inputs and results of every operation as zero (seed 2300826:
    log2 of a subnormal power, -146.7 here and -inf under jax.jit); relax-mlir keeps IEEE
    subnormals as numpy does. The campaign reruns a mismatching build in XLA's mode
    (campaign.run_like_xla) and accepts it when the results then match; it restores the mode."""
    import platform

    import jax
    import jax.numpy as jnp
    import numpy as np

    import relax_mlir
    from relax_mlir.frontend.jax import from_jax

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the flush-to-zero mode is set through x86's MXCSR")
    (n,) = jax.export.symbolic_shape("n")
    f = lambda x, y: jnp.log2(x * y)  # noqa: E731
    exe = relax_mlir.compile(from_jax(f, jax.ShapeDtypeStruct((n,), jnp.float32), jax.ShapeDtypeStruct((n,), jnp.float32)))
    x = np.array([1e-20, 1e-40, 2.0], np.float32)
    y = np.array([1e-20, 1.0, 4.0], np.float32)
    ieee = exe(x, y)
    np.testing.assert_allclose(ieee, np.log2(x * y), rtol=1e-6)
    want = np.asarray(jax.jit(f)(x, y))
    assert np.isneginf(want[:2]).all() and np.isfinite(ieee).all()
    xla = campaign.run_like_xla(lambda: exe(x, y))
    if xla is None:
        pytest.skip("no C compiler to set the MXCSR")
    np.testing.assert_array_equal(xla, want)
    np.testing.assert_array_equal(exe(x, y), ieee)  # the mode is restored


def test_products_and_selections_of_normalized_values_are_unit_scale():
    """A layer norm of constant rows is noise (0 here, +-2e-4 in jax.jit); selected by `where`
    and multiplied by an iota (seed 2300387) it is still judged against max(1, largest element)."""
    from fuzz import gen

    p = gen.generate(2300387)
    assert p.unit_scale_outputs()[0], p.source()
    # a variance of equal values (seed 2300948: 5.7e-14 here, 0 in jax.jit) likewise
    v = gen.generate(2300948)
    assert v.unit_scale_outputs()[2], v.source()


def test_cancelling_sums_are_judged_against_their_terms():
    """A sum that cancels 1e30 against -1e30 is any value within an ulp of 1e30 of the exact one
    (seed 2301102: a bf16 sum of 33 terms, 1.46 here, -0.14 in jax.jit, exact 65540): an
    order-dependent value matches within the tolerance of the size of its terms (the program on
    the inputs' absolute values); a wrong sum of small terms still does not."""
    import numpy as np

    got, want = np.float32([1.46, 3.0]), np.float32([-0.14, 3.0])
    assert campaign.compare(got, want, exact=False, order_dependent=True)
    assert campaign.compare(got, want, exact=False, order_dependent=True, magnitude=np.float32([2e30, 3.0])) is None
    assert campaign.compare(np.float32([5.0]), np.float32([3.0]), exact=False, order_dependent=True,
                            magnitude=np.float32([3.0]))
    assert campaign.compare(got, want, exact=False, magnitude=np.float32([2e30, 3.0]))  # not a sum: no
    (res,) = campaign.run_batch([2301102], "cpu", do_minimize=False)
    assert res["status"] == "ok", campaign.describe(res)


def test_xla_fusion_deviations_are_judged_op_by_op():
    """jax.jit's softmax of a row holding 1.6e29 is NaN (seed 2301589), XLA op by op and numpy give
    [0, 0, 1, 0]: a build that matches XLA's op-by-op answer (jax.disable_jit) is not a failure; a
    cancelling f64 dot product (seed 2301718) is judged against its terms' size."""
    res = campaign.run_batch([2301589, 2301718], "cpu", do_minimize=False)
    assert [r["status"] for r in res] == ["ok", "ok"], [campaign.describe(r) for r in res]
    assert res[0].get("xla_fusion_only")


def test_values_jax_does_not_pin_down_and_more_accurate_results():
    """Two oracle fallbacks, each with its seed: an element whose jax.jit value moves beyond the
    tolerance when the float inputs move by 4 ulps matches any finite value (seed 2353059: sin of
    a float32 variance of 1.26e8), while a well-conditioned element that differs still fails; a
    result that matches the program run one float width wider, with jax.jit's NaN and Inf, is
    more accurate than jax.jit (seed 2352569: a float16 cumsum XLA accumulates in float16)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    f = jax.jit(lambda x: (jnp.sin(jnp.var(x, axis=1)), jnp.mean(x, axis=1)))
    x = np.float32([[0.0, 1.0, 2.0, 3.0], [-2.3, 65504.0, 1.0, 7.0]])
    want = [np.asarray(w) for w in f(x)]
    moved = campaign._perturbed_reference(f, [x], want)
    unstable = campaign._moved_elements(moved[0], want[0], None, False)
    assert unstable.tolist() == [False, True]
    got = want[0].copy()
    got[1] = -want[0][1]  # the ill-conditioned element: any finite value
    assert campaign.compare(got, want[0], exact=False)
    assert campaign.compare(got, want[0], exact=False, unstable=unstable) is None
    got[0] += 0.5  # a well-conditioned element that differs
    assert campaign.compare(got, want[0], exact=False, unstable=unstable)
    assert not campaign._moved_elements(moved[1], want[1], None, False).any()
    res = campaign.run_batch([2353059, 2352569], "cpu", do_minimize=False)
    assert [r["status"] for r in res] == ["ok", "ok"], [campaign.describe(r) for r in res]
    assert res[0].get("ill_conditioned_only") and res[1].get("more_accurate_than_xla")


def test_an_overflow_jax_misses_by_rounding_early_is_more_accurate():
    """A float16 reverse cumsum whose exact value, 65526.3, rounds to inf in float16 (seed
    2342893): ours is inf, XLA's (every partial sum rounded to float16) 65504, the program on
    float32 inputs cast back inf. An Inf jax.jit does not have passes when the wider result has it
    too, and only then; jax.jit's own NaN and Inf must still be kept."""
    import numpy as np

    want = np.float16([65504.0, 1.0, np.inf, np.nan])
    wide = np.float16([np.inf, 1.0, np.inf, np.nan])
    ours = np.float16([np.inf, 1.0, np.inf, np.nan])
    assert campaign._keeps_non_finite(ours, want) and campaign.compare(ours, wide, exact=False) is None
    assert not campaign._keeps_non_finite(np.float16([np.inf, 1.0, 5.0, np.nan]), want)  # lost jax's inf
    assert not campaign._keeps_non_finite(np.float16([np.inf, 1.0, np.inf, 2.0]), want)  # lost jax's NaN
    assert campaign.compare(np.float16([-np.inf, 1.0, np.inf, np.nan]), wide, exact=False)  # wrong sign
    (res,) = campaign.run_batch([2342893], "cpu", do_minimize=False)
    assert res["status"] == "ok", campaign.describe(res)
    assert res.get("more_accurate_than_xla")


def test_vulkan_type_refusal_is_a_clean_refusal():
    """Vulkan's refusal of i16 buffers beside f16 values (seed 2301122: a clipped f16 cast to i16)
    is a located CompileError saying "not supported on Vulkan", which the campaign counts as a
    clean refusal, not a compile failure (compiling needs no Vulkan device)."""
    import jax
    import jax.numpy as jnp

    import relax_mlir
    from relax_mlir.frontend.jax import from_jax

    (n,) = jax.export.symbolic_shape("n")
    f = lambda a: jnp.where(jnp.isnan(a), 0, jnp.clip(a, -1000, 1000)).astype(jnp.int16)  # noqa: E731
    with pytest.raises(relax_mlir.CompileError) as e:
        relax_mlir.compile(from_jax(f, jax.ShapeDtypeStruct((n,), jnp.float16)), target="vulkan")
    assert campaign.refused_by_target(e.value, "vulkan"), str(e.value)
    assert " at loc(" in str(e.value)


def test_generator_versions_keep_old_seeds():
    """Seeds below gen.V2_FIRST_SEED never draw the second table's families (their programs, named
    by seed in earlier findings, stay what they were); from it on, each of them is drawn."""
    from fuzz import gen

    new = {"cumulative", "pool", "pad"}
    assert not any(new & set(gen.generate(s).families) for s in range(300))
    drawn = set()
    for s in range(gen.V2_FIRST_SEED, gen.V2_FIRST_SEED + 300):
        drawn |= set(gen.generate(s).families)
    assert new <= drawn
    # convolutions from V5_FIRST_SEED on only, their kernels without NaN or infinities
    assert not any("conv" in gen.generate(s).families for s in range(gen.V4_FIRST_SEED, gen.V4_FIRST_SEED + 300))
    progs = [gen.generate(s) for s in range(gen.V5_FIRST_SEED, gen.V5_FIRST_SEED + 100)]
    convs = [p for p in progs if "conv" in p.families]
    assert len(convs) >= 5 and all(any(a.finite for a in p.args) for p in convs)
    # scatters, dynamic slices and loops from V6_FIRST_SEED on only; a scatter's set at distinct indices
    v6 = {"scatter", "dynamic", "loop"}
    assert not any(v6 & set(gen.generate(s).families) for s in range(gen.V5_FIRST_SEED, gen.V5_FIRST_SEED + 300))
    drawn = set()
    for s in range(gen.V6_FIRST_SEED, gen.V6_FIRST_SEED + 100):
        prog = gen.generate(s)
        drawn |= set(prog.families)
        for a in prog.args:
            if a.index_mode == "distinct":
                env = prog.bindings()[-1]
                x = gen.make_inputs(prog, env)[prog.args.index(a)]
                assert len(set(x.reshape(-1).tolist())) == x.size and (x >= 0).all()
    assert v6 <= drawn
    # complex arithmetic from V7_FIRST_SEED on only
    assert not any("complex" in gen.generate(s).families for s in range(gen.V6_FIRST_SEED, gen.V6_FIRST_SEED + 300))
    assert any("complex" in gen.generate(s).families for s in range(gen.V7_FIRST_SEED, gen.V7_FIRST_SEED + 50))
    # complex arguments and results from V8_FIRST_SEED on only, never read by another statement
    assert not any(a.dtype in gen.COMPLEX for s in range(gen.V7_FIRST_SEED, gen.V7_FIRST_SEED + 300)
                   for a in gen.generate(s).args)
    v8 = [gen.generate(s) for s in range(gen.V8_FIRST_SEED, gen.V8_FIRST_SEED + 100)]
    assert sum(any(a.dtype in gen.COMPLEX for a in p.args) for p in v8) >= 10
    # complex transcendental functions from V9_FIRST_SEED on only
    # (tan, tanh, sigmoid and powers shift z off their poles by 0.3183)
    assert not any("0.3183" in p.source() for p in v8)
    v9 = [gen.generate(s).source() for s in range(gen.V9_FIRST_SEED, gen.V9_FIRST_SEED + 100)]
    assert sum("0.3183" in src for src in v9) >= 4
    for p in v8:
        for name, _ in p.stmts:
            v = p.values[name]
            assert v.dtype in gen.COMPLEX or not any(p.values[d].dtype in gen.COMPLEX for d in v.deps), p.source()
    # values the long way round to themselves from V10_FIRST_SEED on only; each one equal to x
    assert not any("identity" in gen.generate(s).families for s in range(gen.V9_FIRST_SEED, gen.V9_FIRST_SEED + 300))
    v10 = [gen.generate(s) for s in range(gen.V10_FIRST_SEED, gen.V10_FIRST_SEED + 100)]
    assert sum("identity" in p.families for p in v10) >= 10
    # the special functions from V11_FIRST_SEED on only
    assert not any("special" in gen.generate(s).families for s in range(gen.V10_FIRST_SEED, gen.V10_FIRST_SEED + 300))
    v11 = [gen.generate(s) for s in range(gen.V11_FIRST_SEED, gen.V11_FIRST_SEED + 100)]
    assert sum("special" in p.families for p in v11) >= 10
    # dense linear algebra from V12_FIRST_SEED on only
    assert not any("linalg" in gen.generate(s).families for s in range(gen.V11_FIRST_SEED, gen.V11_FIRST_SEED + 300))
    v12 = [gen.generate(s) for s in range(gen.V12_FIRST_SEED, gen.V12_FIRST_SEED + 100)]
    assert sum("linalg" in p.families for p in v12) >= 10
    # data-dependent selection and indexing from V13_FIRST_SEED on only, each form drawn
    assert not any("data" in gen.generate(s).families for s in range(gen.V12_FIRST_SEED, gen.V12_FIRST_SEED + 300))
    v13 = [gen.generate(s) for s in range(gen.V13_FIRST_SEED, gen.V13_FIRST_SEED + 300)]
    assert sum("data" in p.families for p in v13) >= 100
    drawn = {e.split("(")[0] for p in v13 for n, e in p.stmts if p.families[int(n[1:])] == "data"}
    assert {"lax.top_k", "jnp.searchsorted", "lax.while_loop", "jnp.unique", "jnp.nonzero", "jax.nn.one_hot",
            "lax.bitcast_convert_type", "lax.reduce_precision", "jnp.take_along_axis"} <= drawn, drawn


def test_a_crash_of_the_reference_is_not_blamed_on_relax():
    """Seed 2360773: jax.jit dies with SIGFPE on `lax.rem(arange(n), abs(arange(n)))` at n = 1
    (XLA folds the remainder by zero); the worker said "crash" for our build. The campaign now
    tells whose code ran (@@PHASE) and runs such a program again without the reference: every
    variant and binding of ours still runs (no signal, no error), uncompared."""
    (res,) = campaign.run_batch([2360773], "cpu", do_minimize=False)
    assert res["status"] in ("reference-crash", "ok"), campaign.describe(res)  # "ok" once XLA is fixed
    if res["status"] == "reference-crash":
        assert "jax.jit died" in res["detail"]
