"""GPU backend: relax programs -> mapped gpu.func kernels -> PTX, assembled by ptxas (when present)."""
from __future__ import annotations


import pytest
from mlir import ir

import relax_mlir
import toolchecks
from relax_mlir.backend import gpu
from relax_mlir.backend.cpu import LoweringError

PIPELINE = ["relax-infer-shapes", "relax-legalize", "relax-lower-shapes", "relax-to-upstream"]


def T(dims, dt="f32"):
    return "!relax.tensor<[" + ", ".join(f'"{d}"' if isinstance(d, str) else str(d) for d in dims) + f"], {dt}>"


def program(params, body, result):
    sig = ", ".join(f"%{n}: {t}" for n, t in params)
    lines = "\n  ".join(body)
    return f"func.func @main({sig}) -> {result[1]} {{\n  {lines}\n  return {result[0]} : {result[1]}\n}}"


U2 = T(["?", "?"])
X = T(["n", 32])
G = T([32])

PROGRAMS = {
    "broadcast_add_relu": program(
        [("x", T(["n", 64])), ("b", T([64]))],
        [f'%s = "relax.add"(%x, %b) : ({T(["n", 64])}, {T([64])}) -> {U2}',
         f'%r = "relax.relu"(%s) : ({U2}) -> {U2}'], ("%r", U2)),
    "softmax": program([("x", X)], [f'%s = "relax.softmax"(%x) {{axis = -1}} : ({X}) -> {U2}'], ("%s", U2)),
    "matmul_bias": program(
        [("a", T(["m", "k"])), ("w", T(["k", 48])), ("b", T([48]))],
        [f'%y = "relax.matmul"(%a, %w) : ({T(["m", "k"])}, {T(["k", 48])}) -> {U2}',
         f'%r = "relax.add"(%y, %b) : ({U2}, {T([48])}) -> {U2}'], ("%r", U2)),
    "layer_norm": program(
        [("x", X), ("g", G), ("b", G)],
        [f'%l = "relax.layer_norm"(%x, %g, %b) {{axes = [-1], epsilon = 1.0e-05 : f32}} : ({X}, {G}, {G}) -> {U2}'],
        ("%l", U2)),
    "row_sum": program([("x", T(["n", "k"]))],
                       [f'%s = "relax.sum"(%x) {{axes = [1], keepdims = false}} : ({T(["n", "k"])}) -> {T(["n"])}'],
                       ("%s", T(["n"]))),
    "row_max": program([("x", T(["n", "k"]))],
                       [f'%s = "relax.max"(%x) {{axes = [1], keepdims = false}} : ({T(["n", "k"])}) -> {T(["n"])}'],
                       ("%s", T(["n"]))),
    "col_mean": program([("x", T(["n", "k"]))],
                        [f'%s = "relax.mean"(%x) {{axes = [0], keepdims = false}} : ({T(["n", "k"])}) -> {T(["k"])}'],
                        ("%s", T(["k"]))),
    "softmax_dynamic": program([("x", T(["n", "k"]))],
                               [f'%s = "relax.softmax"(%x) {{axis = -1}} : ({T(["n", "k"])}) -> {T(["n", "k"])}'],
                               ("%s", T(["n", "k"]))),
    "matmul": program(
        [("a", T(["m", "k"])), ("b", T(["k", "n"]))],
        [f'%y = "relax.matmul"(%a, %b) : ({T(["m", "k"])}, {T(["k", "n"])}) -> {T(["m", "n"])}'], ("%y", T(["m", "n"]))),
    "batch_matmul": program(
        [("a", T(["b", "m", "k"])), ("w", T(["k", "n"]))],
        [f'%y = "relax.matmul"(%a, %w) : ({T(["b", "m", "k"])}, {T(["k", "n"])}) -> {T(["b", "m", "n"])}'],
        ("%y", T(["b", "m", "n"]))),
    "batched_3d": program(
        [("x", T(["b", "s", 16])), ("y", T(["b", "s", 16]))],
        [f'%r = "relax.multiply"(%x, %y) : ({T(["b", "s", 16])}, {T(["b", "s", 16])}) -> {T(["?", "?", "?"])}'],
        ("%r", T(["?", "?", "?"]))),
}


def upstream(text):
    return relax_mlir.run_passes(relax_mlir.parse(text), PIPELINE)


def names(op, name):
    out = []

    def visit(o):
        if o.name == name:
            out.append(o)
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return out


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_map_outlines_kernels(name):
    m = upstream(PROGRAMS[name])
    with m.context:
        gpu.lower(m.op, gpu.GPUOptions(), until="map")
        assert names(m.op, "gpu.launch_func"), str(m.op)
        assert names(m.op, "gpu.func")
        assert not names(m.op, "linalg.generic") and not names(m.op, "scf.parallel")


# Programs whose reductions / matmuls become cooperative kernels (shared memory, barriers).
COOPERATIVE = {"softmax", "matmul_bias", "layer_norm", "row_sum", "row_max", "softmax_dynamic", "matmul",
               "batch_matmul", "col_mean"}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_ptx_assembles(name, tmp_path):
    m = upstream(PROGRAMS[name])
    with m.context:
        gpu.lower(m.op, gpu.GPUOptions())
        ptx = gpu.ptx_of(m.op)
    assert ptx
    for kname, text in ptx.items():
        assert ".entry" in text and ".param" in text and ".target sm_90" in text, kname
    shared = [k for k, text in ptx.items() if ".shared" in text and "bar.sync" in text]
    assert bool(shared) == (name in COOPERATIVE), (name, shared)
    if not toolchecks.ptxas(ptx, tmp_path, name):
        pytest.skip("ptxas not installed")


def test_grid_from_dynamic_dims():
    """The grid is ceildiv(dim, tile) computed on the host: one module for every n."""
    texts = []
    v = T(["n"])
    for src in (PROGRAMS["softmax"], program([("x", v)], [f'%e = "relax.exp"(%x) : ({v}) -> {v}'], ("%e", v))):
        m = upstream(src)
        with m.context:
            gpu.lower(m.op, gpu.GPUOptions(), until="map")
            texts.append(str(m.op))
    assert "threads in (%c32, %c8, %c1)" in texts[0]  # 2-D loops: block (32, 8), x innermost
    assert "ceildiv 256" in texts[1] and "threads in (%c256, %c1, %c1)" in texts[1]  # 1-D loops: 256 threads


def kernels(op):
    return {ir.StringAttr(m.attributes["sym_name"]).value: str(m) for m in names(op, "gpu.module")}


@pytest.mark.parametrize("name", sorted(COOPERATIVE))
def test_cooperative_kernels(name):
    """Each row reduction / matmul kernel has workgroup attributions and barriers."""
    m = upstream(PROGRAMS[name])
    with m.context:
        gpu.lower(m.op, gpu.GPUOptions(), until="map")
        ks = kernels(m.op)
    coop = [t for t in ks.values() if "#gpu.address_space<workgroup>" in t]
    assert coop and all("gpu.barrier" in t for t in coop)
    want = {"softmax": 2, "softmax_dynamic": 2, "layer_norm": 2, "matmul_bias": 1}.get(name, 1)
    assert len(coop) == want, list(ks)


def test_row_reduction_grid_and_block():
    """Default: a 256-thread block per row, grid min(n, 65535) from the dim on the host;
    reduce_threads=32: 8 rows per block, grid min(ceildiv(n, 8), 65535)."""
    for opts, threads, grid in ((gpu.GPUOptions(), "threads in (%c256, %c1, %c1)", ["arith.minui"]),
                                (gpu.GPUOptions(reduce_threads=32), "threads in (%c32, %c8, %c1)",
                                 [", %c7 : index", "arith.divui", "arith.minui"])):
        m = upstream(PROGRAMS["row_sum"])
        with m.context:
            gpu.lower(m.op, opts, until="map")
            text = str(m.op)
        host = text[:text.index("gpu.module")]
        assert threads in host and all(g in host for g in grid), host
        assert "workgroup(%arg4 : memref<256xf32, #gpu.address_space<workgroup>>)" in text


def test_matmul_tile_option():
    for tile, threads, wg in ((64, "(%c16, %c16, %c1)", "memref<1024xf32"), (16, "(%c16, %c16, %c1)", "memref<256xf32"),
                              (8, "(%c8, %c8, %c1)", "memref<64xf32"), (128, "(%c16, %c16, %c1)", "memref<2048xf32")):
        m = upstream(PROGRAMS["matmul"])
        with m.context:
            gpu.lower(m.op, gpu.GPUOptions(matmul_tile=tile), until="map")
            text = str(m.op)
        assert f"threads in {threads}" in text and f"%c{tile - 1}" in text, tile
        attr = f" : {wg}, #gpu.address_space<workgroup>>"
        assert f"workgroup(%arg6{attr}, %arg7{attr})" in text, tile


def test_cooperative_off_and_fallbacks():
    """0 turns a strategy off. A column reduction is a cooperative kernel too: 32 x 8 threads
    per 32 columns, a tree over the 8 in workgroup memory; with reduce_threads=0 it is one
    thread per column looping over the rows."""
    for name in COOPERATIVE:
        m = upstream(PROGRAMS[name])
        with m.context:
            gpu.lower(m.op, gpu.GPUOptions(reduce_threads=0, matmul_tile=0), until="map")
            assert "gpu.barrier" not in str(m.op), name
    col = program([("x", T(["n", "k"]))],
                  [f'%s = "relax.sum"(%x) {{axes = [0], keepdims = false}} : ({T(["n", "k"])}) -> {T(["k"])}'],
                  ("%s", T(["k"])))
    texts = []
    for opts in (gpu.GPUOptions(), gpu.GPUOptions(reduce_threads=0)):
        m = upstream(col)
        with m.context:
            gpu.lower(m.op, opts, until="map")
            texts.append(str(m.op))
    host = texts[0][:texts[0].index("gpu.module")]
    assert host.count("gpu.launch_func") == 1 and "threads in (%c32, %c8, %c1)" in host
    assert texts[0].count("gpu.barrier") == 5  # after the partials, then one per tree step, then before the next tile
    assert "gpu.barrier" not in texts[1] and "scf.for" in texts[1]
    wide = program([("x", T(["n", 4096]))],
                   [f'%s = "relax.sum"(%x) {{axes = [0], keepdims = false}} : ({T(["n", 4096])}) -> {T([4096])}'],
                   ("%s", T([4096])))
    m = upstream(wide)  # 4096 static columns: a thread each (coalesced), no barriers
    with m.context:
        gpu.lower(m.op, gpu.GPUOptions(), until="map")
        assert "gpu.barrier" not in str(m.op) and "scf.for" in str(m.op)


def test_block_option():
    m = upstream(PROGRAMS["broadcast_add_relu"])
    with m.context:
        gpu.lower(m.op, gpu.GPUOptions(block=(64, 4)), until="map")
        text = str(m.op)
    assert "threads in (%c64, %c4, %c1)" in text


def test_ptx_of_lowers_a_mapped_module():
    m = upstream(PROGRAMS["broadcast_add_relu"])
    with m.context:
        gpu.lower(m.op, gpu.GPUOptions(), until="map")
        ptx = gpu.ptx_of(m.op)
    assert ptx and all(".entry" in t for t in ptx.values())


def test_stages_and_pipelines():
    assert list(gpu.STAGES) == ["bufferize", "map", "to-ptx"]
    assert set(gpu.pipeline_strings()) == set(gpu.STAGES)
    with pytest.raises(ValueError):
        gpu.lower(None, until="nope")
    from relax_mlir.targets import all_passes
    PASSES = all_passes()
    for n in ("relax-gpu-map", "relax-gpu-to-ptx", "test-relax-gpu-ptx"):
        assert n in PASSES


@pytest.mark.parametrize("kw", [dict(chip="sm_90", features="+ptx60"), dict(chip="sm_80", features="+ptx63"),
                                dict(chip="gfx90a"), dict(features="ptx80"), dict(block=(64, 64)),
                                dict(block=()), dict(opt_level=7), dict(reduce_threads=48),
                                dict(reduce_threads=2048), dict(matmul_tile=40), dict(matmul_tile=-16)])
def test_bad_options_rejected(kw):
    with pytest.raises(ValueError):
        gpu.GPUOptions(**kw)


def test_sm80_options():
    m = upstream(PROGRAMS["broadcast_add_relu"])
    with m.context:
        gpu.lower(m.op, gpu.GPUOptions(chip="sm_80", features="+ptx70"))
        ptx = gpu.ptx_of(m.op)
    assert all(".target sm_80" in t for t in ptx.values())


def test_child_failure_is_an_exception():
    """A failure inside the isolated to-ptx process comes back as a LoweringError, not a crash."""
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    with ctx:
        m = ir.Module.parse('module attributes {gpu.container_module} {\n'
                            ' gpu.module @k { gpu.func @f() kernel { "foo.bar"() : () -> () gpu.return } } }')
        with pytest.raises(LoweringError):
            gpu.stage_to_ptx(m.operation, gpu.GPUOptions())


def _jax_cuda(fn, *specs):
    import jax

    from relax_mlir.frontend.jax import from_jax

    n = jax.export.symbolic_shape("n")[0]
    return relax_mlir.compile(from_jax(fn, *(jax.ShapeDtypeStruct(tuple(n if d == "n" else d for d in s), dt)
                                            for s, dt in specs)), target="cuda")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_remainder_and_math_compile(dtype, tmp_path):
    """f16 / bf16 remainders (NVVM lowers no half frem: "failed to legalize operation 'llvm.frem'",
    fuzz seed 2,309,355) are f32 remainders of the widened operands; bf16 math in f32."""
    import jax
    import jax.numpy as jnp

    exe = _jax_cuda(lambda a, b: (jax.lax.rem(a, b), jnp.exp(a) * b, a % b), (("n",), dtype), (("n",), dtype))
    assert exe.ptx
    if not toolchecks.ptxas(exe.ptx, tmp_path, dtype):
        pytest.skip("ptxas not installed")


def test_bf16_constant_in_the_host_program():
    """A bf16 constant the host program holds is stored as its bits (the bindings read no bf16
    elements: every cuda program with one failed to compile, fuzz seed 2,309,347), NaN payload,
    -0.0 and infinities included."""
    import base64

    import jax.numpy as jnp
    import ml_dtypes
    import numpy as np

    bits = np.array([0x3FC0, 0x8000, 0xFF80, 0x7FC1, 0x0001], np.uint16)
    c = jnp.asarray(bits.view(ml_dtypes.bfloat16))
    exe = _jax_cuda(lambda x: jnp.concatenate([x, c]), (("n",), jnp.bfloat16))
    held = [g for g in exe.artifacts["hostprog"]["globals"].values() if g["dtype"] == "bf16"]
    assert len(held) == 1 and held[0]["shape"] == [5]
    assert np.array_equal(np.frombuffer(base64.b64decode(held[0]["data"]), np.uint16), bits)
    # a splat (every element the same bits)
    exe = _jax_cuda(lambda x: jnp.concatenate([x, jnp.full((3,), -jnp.inf, jnp.bfloat16)]), (("n",), jnp.bfloat16))
    held = [g for g in exe.artifacts["hostprog"]["globals"].values() if g["dtype"] == "bf16"]
    assert held and all(np.all(np.frombuffer(base64.b64decode(g["data"]), np.uint16) == 0xFF80) for g in held)
