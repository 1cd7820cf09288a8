"""The target registry: targets and their options are checked before any pass runs; named
pipelines are what compile() runs; relax_mlir.from_jax and relax_mlir.frontend resolve."""
import time

import pytest

import relax_mlir
from relax_mlir.backend.cpu import CPUOptions
from relax_mlir.backend.spirv import SPIRVOptions
from relax_mlir.targets import TARGETS, get_target, registry

SRC = """func.func @main(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %0 = "relax.relu"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  return %0 : !relax.tensor<["n", 4], f32>
}"""


def test_targets_registered():
    assert set(TARGETS) == {"cpu", "cuda", "vulkan", "webgpu"}
    for name, cls in TARGETS.items():
        assert cls.name == name and (cls.__doc__ or "").strip()
        assert f"relax-compile-{name}" in registry().pipelines


def test_unknown_target_fails_before_parsing():
    with pytest.raises(relax_mlir.CompileError, match=r"unknown target 'tpu'.*available: cpu, cuda, vulkan"):
        relax_mlir.compile("this is not IR", target="tpu")


@pytest.mark.parametrize("target, options, match", [
    ("vulkan", {"tile_size": (8,)}, r"no option 'tile_size' \(did you mean 'tile_sizes'\?\)"),
    ("vulkan", CPUOptions(), r"takes options of type SPIRVOptions"),
    ("cpu", {"num_threads": 0}, r"num_threads must be an integer >= 1, got 0"),
    ("cpu", {"num_threads": "4"}, r"num_threads must be an integer >= 1, got '4'"),
    ("cpu", {"num_threads": 2.5}, r"num_threads must be an integer >= 1, got 2.5"),
    ("cpu", {"num_threads": True}, r"num_threads must be an integer >= 1, got True"),
    ("cuda", {"chip": "gfx90a"}, r"chip must be an NVIDIA SM such as 'sm_90'.*got 'gfx90a'"),
])
def test_bad_options_fail_before_parsing(target, options, match):
    with pytest.raises(relax_mlir.CompileError, match=match):
        relax_mlir.compile("this is not IR", target=target, options=options)


def test_options_are_honoured():
    t = get_target("vulkan", {"tile_sizes": (16, 4)})
    assert isinstance(t.options, SPIRVOptions) and t.options.tile_sizes == (16, 4)
    assert get_target("cpu", CPUOptions(num_threads=1)).options.num_threads == 1


def test_named_pipelines_are_what_compile_runs():
    reg = registry()
    assert reg.expand(["relax-compile-cpu"]) == list(relax_mlir.OPTIMIZE_PIPELINE)
    assert reg.expand(["relax-lower"]) == list(relax_mlir.DEFAULT_PIPELINE)
    assert "relax-dispatch-library" not in reg.expand(["relax-compile-vulkan"])
    assert "relax-multiversion" not in reg.expand(["relax-compile-vulkan"])
    assert get_target("cpu").pipeline(True) == ["relax-compile-cpu"]
    for items, _ in reg.pipelines.values():  # (an item may carry options: relax-fuse-kernels{max_buffers=16})
        assert all(i.split("{", 1)[0] in reg.passes or i in reg.pipelines for i in items)
    assert "relax-fuse-kernels{max_buffers=16}" in reg.expand(["relax-compile-vulkan"])
    assert "relax-fuse-kernels{max_buffers=8}" in reg.expand(["relax-compile-webgpu"])


def test_registry_names_match_classes():
    for name, cls in registry().passes.items():
        assert cls.name == name and (cls.__doc__ or "").strip(), name


def test_verbose_prints_each_pass(capsys):
    exe = relax_mlir.compile(SRC, verbose=True)
    err = capsys.readouterr().err
    assert "relax-legalize" in err and "cpu backend" in err
    assert exe is not None


def test_dump_ir(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAX_MLIR_DUMP_IR", str(tmp_path / "dump"))
    relax_mlir.compile(SRC)
    dumped = [p.name for p in (tmp_path / "dump").rglob("*.mlir")]
    assert "5_relax-multiversion.mlir" in dumped and "6_relax-legalize.mlir" in dumped, dumped


def test_from_jax_resolves():
    from relax_mlir.frontend.jax import from_jax

    assert relax_mlir.from_jax is from_jax
    assert relax_mlir.frontend.jax.from_jax is from_jax


def test_cpu_only_passes_are_refused_for_other_targets():
    """An explicit pipeline with a pass whose output only the CPU runs (BLAS calls, the fused
    attention kernel) is a CompileError for a GPU target, before any pass runs; the target's own
    pipelines leave them out (the fused attention becomes its unfused chain there)."""
    import pytest

    import relax_mlir
    from relax_mlir.targets import registry
    from relax_mlir.targets import CPU_ONLY_PASSES

    src = """func.func @main(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %y = "relax.add"(%x, %x) : (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  return %y : !relax.tensor<["n", 4], f32>
}"""
    for target in ("vulkan", "webgpu", "cuda"):
        assert not set(CPU_ONLY_PASSES) & set(registry().expand([f"relax-compile-{target}"]))
        for p in CPU_ONLY_PASSES:
            with pytest.raises(relax_mlir.CompileError, match=rf"{p}: CPU-only .* target '{target}'"):
                relax_mlir.compile(src, target=target, passes=["relax-infer-shapes", p, "relax-legalize",
                                                               "relax-lower-shapes", "relax-to-upstream"])
        # inside a named pipeline or a comma-separated item too
        for passes in (["relax-compile-cpu"], ["relax-infer-shapes,relax-dispatch-library{min_static=1}",
                                               "relax-legalize"]):
            with pytest.raises(relax_mlir.CompileError, match=rf"relax-\S+: CPU-only .* target '{target}'"):
                relax_mlir.compile(src, target=target, passes=passes)
