"""Every field of every target's options, and compile()'s own arguments, are checked before any
pass runs: a bad value is a CompileError naming the option, the value (its repr) and what is
accepted, never a crash or a raw backend failure later (probe s21/errors V1, V6, V7)."""
import numpy as np
import pytest

import relax_mlir
from relax_mlir.backend.cpu import CPUOptions
from relax_mlir.backend.gpu import GPUOptions
from relax_mlir.backend.spirv import SPIRVOptions
from relax_mlir.targets import get_target

SRC = """func.func @main(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %0 = "relax.relu"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  return %0 : !relax.tensor<["n", 4], f32>
}"""

BAD_OPTIONS = [
    # (target, options, the message after "invalid option for target '<target>': ")
    ("cpu", {"matmul_tile": (-1, -1, -1)}, "matmul_tile must be a tuple of 3 integers in 1..64 "
                                           "(the fallback matmul's register tile m, n, k), got (-1, -1, -1)"),
    ("cpu", {"matmul_tile": (0, 0, 0)}, "matmul_tile must be a tuple of 3 integers in 1..64"),
    ("cpu", {"matmul_tile": (4, 16)}, "matmul_tile must be a tuple of 3 integers in 1..64 (the fallback matmul's "
                                      "register tile m, n, k), got (4, 16)"),
    ("cpu", {"matmul_tile": "x"}, "matmul_tile must be a tuple of 3 integers in 1..64 (the fallback matmul's "
                                  "register tile m, n, k), got 'x'"),
    ("cpu", {"vector_bytes": -32}, "vector_bytes must be a power of two in 4..64 (bytes of one SIMD register: "
                                   "16 SSE/NEON, 32 AVX2, 64 AVX-512), got -32"),
    ("cpu", {"vector_bytes": 0}, "vector_bytes must be a power of two in 4..64"),
    ("cpu", {"vector_bytes": 3}, "vector_bytes must be a power of two in 4..64"),
    ("cpu", {"vector_bytes": 4096}, "vector_bytes must be a power of two in 4..64"),
    ("cpu", {"vector_bytes": "32"}, "vector_bytes must be a power of two in 4..64 (bytes of one SIMD register: "
                                    "16 SSE/NEON, 32 AVX2, 64 AVX-512), got '32'"),
    ("cpu", {"vector_unroll": 0}, "vector_unroll must be an integer in 1..16 (vector registers per vector tile), "
                                  "got 0"),
    ("cpu", {"vector_unroll": -1}, "vector_unroll must be an integer in 1..16"),
    ("cpu", {"max_full_vector": -5}, "max_full_vector must be an integer in 0..4096 (elements of a static innermost "
                                     "dim vectorized whole), got -5"),
    ("cpu", {"min_task_size": 10**12}, "min_task_size must be at most 2147483647 (a 32-bit option), "
                                       "got 1000000000000"),
    ("cpu", {"min_task_size": 0}, "min_task_size must be an integer >= 1, got 0"),
    ("cpu", {"parallel_grain": 1.5}, "parallel_grain must be an integer >= 1, got 1.5"),
    ("cpu", {"num_threads": 0}, "num_threads must be an integer >= 1, got 0"),
    ("cpu", {"num_threads": True}, "num_threads must be an integer >= 1, got True"),
    ("cpu", {"opt_level": "2"}, "opt_level must be an integer in 0..3, got '2'"),
    ("cpu", {"opt_level": 4}, "opt_level must be an integer in 0..3, got 4"),
    ("cpu", {"vectorize": "yes"}, "vectorize must be True or False, got 'yes'"),
    ("cpu", {"flush_denormals": "maybe"}, "flush_denormals must be True or False, got 'maybe'"),
    ("cuda", {"chip": "sm_1"}, "chip must be an NVIDIA SM such as 'sm_90' (or 'sm_90a'), one of sm_50, sm_52"),
    ("cuda", {"chip": "gfx90a"}, "chip must be an NVIDIA SM such as 'sm_90'"),
    ("cuda", {"chip": "sm_95"}, "chip must be an NVIDIA SM such as 'sm_90' (or 'sm_90a'), one of sm_50, sm_52, "
                                "sm_53, sm_60, sm_61, sm_62, sm_70, sm_72, sm_75, sm_80, sm_86, sm_87, sm_88, sm_89, "
                                "sm_90, sm_100, sm_101, sm_103, sm_110, sm_120, sm_121; got 'sm_95'"),
    ("cuda", {"chip": 90}, "chip must be an NVIDIA SM such as 'sm_90' (or 'sm_90a'), one of sm_50"),
    ("cuda", {"chip": "sm_103", "features": "+ptx87"}, "sm_103 needs PTX ISA 8.8 or newer (features=+ptx88), "
                                                       "got +ptx87"),
    ("cuda", {"features": "+ptx99"}, "features=+ptx99 is no PTX ISA version that LLVM writes (+ptx40 .. +ptx90"),
    ("cuda", {"opt_level": "3"}, "opt_level must be an integer in 0..3, got '3'"),
    ("cuda", {"block": "32,8"}, "block must be a tuple of 1 to 3 integers in 1..1024 (threads along x, y, z), "
                                "got '32,8'"),
    ("cuda", {"block": (0, 0)}, "block must be a tuple of 1 to 3 integers in 1..1024"),
    ("cuda", {"block": (1, 1, 128)}, "block: a CUDA block has at most 64 threads along z, got (1, 1, 128)"),
    ("cuda", {"isolate": 1}, "isolate must be True or False, got 1"),
    ("cuda", {"reduce_threads": True}, "reduce_threads must be an integer in 0..1024 (0: off), got True"),
    ("cuda", {"matmul_tile": "64"}, "matmul_tile must be an integer in 0..128 (0: off), got '64'"),
    ("vulkan", {"caps": ("Bogus",)}, "caps: 'Bogus' is no SPIR-V capability that MLIR knows"),
    ("vulkan", {"caps": ("Int64",)}, "caps must include 'Shader' (every Vulkan shader declares it), got ('Int64',)"),
    ("vulkan", {"caps": "Shader"}, "caps must be a tuple of SPIR-V capability names, got 'Shader'"),
    ("vulkan", {"exts": ("SPV_KHR_nope",)}, "exts: 'SPV_KHR_nope' is no SPIR-V extension that MLIR knows"),
    ("vulkan", {"spirv_version": "v9.9"}, "spirv_version must be one of v1.0, v1.1, v1.2, v1.3, v1.4, v1.5, v1.6, "
                                          "got 'v9.9'"),
    ("vulkan", {"tile_sizes": (0,)}, "tile_sizes must be a tuple of 1 to 8 integers in 1..1024 "
                                     "(invocations along each loop dim), got (0,)"),
    ("webgpu", {"tile_sizes": ("32", 8)}, "tile_sizes must be a tuple of 1 to 8 integers in 1..1024"),
    ("webgpu", {"spirv_version": 1.0}, "spirv_version must be one of v1.0"),
]


@pytest.mark.parametrize("target, options, message", BAD_OPTIONS)
def test_bad_option_is_a_compile_error_before_parsing(target, options, message):
    with pytest.raises(relax_mlir.CompileError) as info:
        relax_mlir.compile("this is not IR", target=target, options=options)
    assert str(info.value).startswith(f"invalid option for target '{target}': {message}")


def test_matmul_tile_minus_one_does_not_abort():
    """The probe's SIGABRT: a negative tile reached a tensor type in the fallback matmul schedule."""
    x_t, w_t, y_t = '!relax.tensor<["n", 8], i32>', "!relax.tensor<[8, 4], i32>", '!relax.tensor<["n", 4], i32>'
    src = f"""func.func @main(%x: {x_t}, %w: {w_t}) -> {y_t} {{
  %0 = "relax.matmul"(%x, %w) : ({x_t}, {w_t}) -> {y_t}
  return %0 : {y_t}
}}"""
    with pytest.raises(relax_mlir.CompileError, match=r"matmul_tile must be a tuple of 3 integers in 1\.\.64"):
        relax_mlir.compile(src, options={"matmul_tile": (-1, -1, -1)})
    exe = relax_mlir.compile(src, options={"matmul_tile": [3, 5, 7]})  # any positive tile computes the same
    x, w = np.arange(24, dtype=np.int32).reshape(3, 8), np.arange(32, dtype=np.int32).reshape(8, 4)
    np.testing.assert_array_equal(exe(x, w), x @ w)


def test_options_are_normalized_and_hashable():
    """A list where a tuple is declared, numpy ints and bools: accepted, stored as the declared
    types (the options are a compile-cache key)."""
    o = get_target("cpu", {"matmul_tile": [2, 8, 1], "num_threads": np.int64(2), "vectorize": np.bool_(True)}).options
    assert o.matmul_tile == (2, 8, 1) and type(o.num_threads) is int and o.vectorize is True
    assert hash(o) == hash(CPUOptions(matmul_tile=(2, 8, 1), num_threads=2))
    assert get_target("cuda", {"block": [16, 16]}).options.block == (16, 16)
    s = get_target("vulkan", {"caps": ["Shader", "Int64"], "tile_sizes": [16, 4]}).options
    assert s.caps == ("Shader", "Int64") and s.tile_sizes == (16, 4)
    hash(s)
    assert GPUOptions(chip="sm_90a").chip == "sm_90a"
    for v in ("v1.0", "v1.3", "v1.6"):
        assert SPIRVOptions(spirv_version=v).spirv_version == v


@pytest.mark.parametrize("kw, message", [
    (dict(optimize="no"), "compile(): optimize must be True or False, got 'no'"),
    (dict(optimize=1), "compile(): optimize must be True or False, got 1"),
    (dict(verbose="x"), "compile(): verbose must be True or False, got 'x'"),
    (dict(passes=3), "compile(): passes must be a pipeline string or a list of pass names "
                     "(['relax-infer-shapes', 'relax-legalize']), got 3"),
    (dict(passes=["relax-lower", None]), "compile(): passes must be a pipeline string or a list of pass names"),
])
def test_compile_arguments_are_checked(kw, message):
    with pytest.raises(relax_mlir.CompileError) as info:
        relax_mlir.compile(SRC, **kw)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize("passes", ["relax-lower", "builtin.module(relax-lower)",
                                    "relax-infer-shapes,relax-legalize,relax-lower-shapes,relax-to-upstream"])
def test_passes_as_one_pipeline_string(passes):
    """A str is one textual pipeline, as `mlir-opt --pass-pipeline` and `PassManager.parse` take
    it (it used to be iterated as characters: "unknown pass or pipeline 'r'")."""
    exe = relax_mlir.compile(SRC, passes=passes)
    x = np.array([[-1, 2, -3, 4]], np.float32)
    np.testing.assert_array_equal(exe(x), np.maximum(x, 0))
    m = relax_mlir.run_passes(SRC, passes)
    assert "relax.relu" not in str(m)


def test_pipeline_string_with_a_bad_pass_names_it():
    with pytest.raises(relax_mlir.CompileError, match=r"unknown pass or pipeline 'relax-lowr' \(did you mean "
                                                      r"'relax-lower'\?\)"):
        relax_mlir.compile(SRC, passes="relax-lowr")


def test_a_bad_library_setting_is_named_before_any_pass(monkeypatch):
    """RELAX_MLIR_LIBRARY=default (not a mode) was an 'internal error in relax-dispatch-library'."""
    monkeypatch.setenv("RELAX_MLIR_LIBRARY", "default")
    with pytest.raises(relax_mlir.CompileError, match="RELAX_MLIR_LIBRARY must be auto, always or never, got 'default'"):
        relax_mlir.compile('func.func @main(%x: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32> {\n'
                           '  return %x : !relax.tensor<["n"], f32>\n}')
