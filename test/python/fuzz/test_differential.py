"""The differential fuzzer in CI: a fixed seed set of random JAX programs (fuzz/gen.py), each
exported with symbolic dims, compiled ONCE with the full pipeline and once with one optional pass
removed (round robin over the seeds, so every pass is removed for many programs), run at several
bindings of its symbols and compared with jax.jit (fuzz/campaign.py says how).

The programs run in worker processes, one per batch (a crash or a hang is that program's
failure; the rest of the batch still runs).  Each batch is one test; its failure message lists
every failing seed with a minimal, self-contained repro.

Settings (`make fuzz` runs the same code with larger values):
    RELAX_MLIR_FUZZ_PROGRAMS     CPU programs, seeds FIRST_SEED ... (default 300)
    RELAX_MLIR_FUZZ_VULKAN       how many of them also run on Vulkan / lavapipe (default 60)
    RELAX_MLIR_FUZZ_FIRST_SEED   the first seed (default 0)
    RELAX_MLIR_FUZZ_BATCH        programs per batch / worker process (default 25)
    RELAX_MLIR_FUZZ_ALL_VARIANTS 1: compile every program once per removed pass (default 0)
"""
import os

import pytest

pytest.importorskip("jax")

from fuzz import campaign  # noqa: E402

PROGRAMS = int(os.environ.get("RELAX_MLIR_FUZZ_PROGRAMS", "300"))
VULKAN = int(os.environ.get("RELAX_MLIR_FUZZ_VULKAN", "60"))
FIRST = int(os.environ.get("RELAX_MLIR_FUZZ_FIRST_SEED", "0"))
BATCH = int(os.environ.get("RELAX_MLIR_FUZZ_BATCH", "25"))
ALL_VARIANTS = os.environ.get("RELAX_MLIR_FUZZ_ALL_VARIANTS", "0") == "1"


def _batches(n):
    seeds = list(range(FIRST, FIRST + n))
    return [seeds[i:i + BATCH] for i in range(0, len(seeds), BATCH)]


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


@pytest.mark.parametrize("seeds", _batches(PROGRAMS), ids=lambda s: f"seeds{s[0]}-{s[-1]}")
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
