"""Pattern kinds of legalized kernels, and relax-canonicalize/dce/cse keeping numerics."""
from __future__ import annotations

import numpy as np
import pytest

import relax_mlir
from relax_mlir.analysis.pattern_kind import KINDS, classify_kernel, strongest



# --- numerics: the canonicalized program computes the same values ------------------------------

PIPELINE = ["relax-infer-shapes", "relax-canonicalize", "relax-legalize", "relax-lower-shapes", "relax-to-upstream"]

VIEWS = """
func.func @main(%x: !relax.tensor<["b", "s", 6], f32>) -> !relax.tensor<["?", "?", "?"], f32> {
  %0 = "relax.reshape"(%x) {shape = ["b*s", 6]} : (!relax.tensor<["b", "s", 6], f32>) -> !relax.tensor<["?", "?"], f32>
  %1 = "relax.reshape"(%0) {shape = ["b", "3*s", 2]} : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?", "?"], f32>
  %2 = "relax.permute_dims"(%1) {axes = [1, 2, 0]} : (!relax.tensor<["?", "?", "?"], f32>) -> !relax.tensor<["?", "?", "?"], f32>
  %3 = "relax.permute_dims"(%2) {axes = [0, 2, 1]} : (!relax.tensor<["?", "?", "?"], f32>) -> !relax.tensor<["?", "?", "?"], f32>
  %4 = "relax.permute_dims"(%3) {axes = [2, 0, 1]} : (!relax.tensor<["?", "?", "?"], f32>) -> !relax.tensor<["?", "?", "?"], f32>
  %5 = "relax.exp"(%4) : (!relax.tensor<["?", "?", "?"], f32>) -> !relax.tensor<["?", "?", "?"], f32>
  %6 = "relax.exp"(%4) : (!relax.tensor<["?", "?", "?"], f32>) -> !relax.tensor<["?", "?", "?"], f32>
  %7 = "relax.add"(%5, %6) : (!relax.tensor<["?", "?", "?"], f32>, !relax.tensor<["?", "?", "?"], f32>) -> !relax.tensor<["?", "?", "?"], f32>
  %8 = "relax.astype"(%7) {dtype = f32} : (!relax.tensor<["?", "?", "?"], f32>) -> !relax.tensor<["?", "?", "?"], f32>
  %9 = "relax.negative"(%8) : (!relax.tensor<["?", "?", "?"], f32>) -> !relax.tensor<["?", "?", "?"], f32>
  return %8 : !relax.tensor<["?", "?", "?"], f32>
}
"""


def reference(x):
    b, s, _ = x.shape
    y = x.reshape(b * s, 6).reshape(b, 3 * s, 2)
    y = y.transpose(1, 2, 0).transpose(0, 2, 1).transpose(2, 0, 1)
    return (np.exp(y) + np.exp(y)).astype(np.float32)


@pytest.mark.parametrize("passes", [PIPELINE, PIPELINE[:2] + ["relax-cse", "relax-dce"] + PIPELINE[2:]])
def test_canonicalize_keeps_numerics(passes):
    exe = relax_mlir.compile(VIEWS, passes=passes)
    rng = np.random.default_rng(0)
    for b, s in ((1, 1), (2, 7), (3, 64)):
        x = rng.standard_normal((b, s, 6)).astype(np.float32)
        np.testing.assert_allclose(exe(x), reference(x), rtol=1e-5, atol=1e-6)


def test_canonicalize_rewrites_the_chains():
    m = relax_mlir.run_passes(relax_mlir.parse(VIEWS), ["relax-canonicalize", "relax-cse"])
    _KEEP.append(m)  # see _KEEP: a module collected during a later compile crashes (pre-existing)
    text = str(m)
    assert text.count('"relax.reshape"') == 1
    assert text.count('"relax.permute_dims"') == 1 and "axes = [2, 1, 0]" in text
    assert text.count('"relax.exp"') == 1
    assert '"relax.astype"' not in text and '"relax.negative"' not in text


# --- pattern kinds ------------------------------------------------------------------------------

# Modules stay alive for the session: an op must not outlive its context, and a module collected
# while a later test compiles has crashed the interpreter (seen with relax-infer-shapes alone too).
_KEEP = []


def kernels(module) -> dict[str, object]:
    """relax.kernel name -> kernel func.func, of a module's top level."""
    _KEEP.append(module)
    out = {}
    for op in module.op.regions[0].blocks[0].operations:
        if "relax.kernel" in op.attributes:
            out[str(op.attributes["relax.kernel"]).strip('"')] = op
    return out


X = '!relax.tensor<["n", 4], f32>'
U2 = '!relax.tensor<["?", "?"], f32>'
U1 = '!relax.tensor<["?"], f32>'

GRAPH = f"""
func.func @main(%x: {X}, %y: !relax.tensor<[4], f32>, %w: !relax.tensor<[4, 8], f32>,
                %ids: !relax.tensor<["k"], i32>) -> {U2} {{
  %0 = "relax.exp"(%x) : ({X}) -> {U2}
  %1 = "relax.add"(%x, %y) : ({X}, !relax.tensor<[4], f32>) -> {U2}
  %2 = "relax.matmul"(%x, %w) : ({X}, !relax.tensor<[4, 8], f32>) -> {U2}
  %3 = "relax.sum"(%x) {{axes = [1]}} : ({X}) -> {U1}
  %4 = "relax.permute_dims"(%x) {{axes = [1, 0]}} : ({X}) -> {U2}
  %5 = "relax.take"(%x, %ids) {{axis = 0}} : ({X}, !relax.tensor<["k"], i32>) -> {U2}
  %6 = "relax.softmax"(%x) {{axis = 1}} : ({X}) -> {U2}
  %7 = "relax.broadcast_to"(%y) {{shape = ["n", 4]}} : (!relax.tensor<[4], f32>) -> {U2}
  %8 = "relax.strided_slice"(%x) {{axes = [1], begin = [0], end = [2], strides = [1]}} : ({X}) -> {U2}
  %9 = "relax_v.concat"(%x, %x) {{axis = 0}} : ({X}, {X}) -> {U2}
  %10 = "relax.mean"(%x) {{axes = [1]}} : ({X}) -> {U1}
  %11 = "relax.zeros"() {{shape = [3], dtype = f32}} : () -> {U1}
  %12 = "relax.layer_norm"(%x, %y, %y) {{axes = [1]}} : ({X}, !relax.tensor<[4], f32>, !relax.tensor<[4], f32>) -> {U2}
  return %4 : {U2}
}}
"""

EXPECTED = {
    "exp": "elementwise", "zeros": "elementwise",
    "add": "broadcast", "broadcast_to": "broadcast",
    "permute_dims": "injective", "take": "injective", "strided_slice": "injective", "concat": "injective",
    "sum": "reduction", "mean": "reduction", "softmax": "reduction", "layer_norm": "reduction",
    "matmul": "output_fusable",
}


@pytest.fixture(scope="module")
def legalized():
    return kernels(relax_mlir.run_passes(relax_mlir.parse(GRAPH), ["relax-legalize"]))


@pytest.mark.parametrize("op", sorted(EXPECTED))
def test_legalized_kernel_kind(legalized, op):
    assert classify_kernel(legalized[op]) == EXPECTED[op]


def test_every_kernel_has_a_kind(legalized):
    assert set(legalized) == set(EXPECTED)
    assert all(classify_kernel(k) in KINDS for k in legalized.values())


def _kernel(body: str, args: str, result: str) -> object:
    text = (f'func.func private @k({args}) -> {result} attributes {{relax.kernel = "k"}} {{\n{body}\n}}')
    return kernels(relax_mlir.parse(text))["k"]


GENERIC = """
  %r = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{its}]}}
      ins(%a, %b : tensor<4x4xf32>, {b_t}) outs(%o : tensor<4x4xf32>) {{
  ^bb0(%x: f32, %y: f32, %z: f32):
    {body}
    linalg.yield %v : f32
  }} -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>"""
ARGS = "%a: tensor<4x4xf32>, %b: tensor<4x4xf32>, %o: tensor<4x4xf32>"
ID = "affine_map<(d0, d1) -> (d0, d1)>"
T = "affine_map<(d0, d1) -> (d1, d0)>"
ROW = "affine_map<(d0, d1) -> (d1)>"
MUL = "%v = arith.mulf %x, %y : f32"


def generic(maps, its, body=MUL, b_t="tensor<4x4xf32>"):
    text = GENERIC.format(maps=", ".join(maps), its=", ".join(f'"{i}"' for i in its), body=body, b_t=b_t)
    return _kernel(text, ARGS.replace("%b: tensor<4x4xf32>", f"%b: {b_t}"), "tensor<4x4xf32>")


def test_generic_permuted_input_is_injective():
    assert classify_kernel(generic([ID, T, ID], ["parallel", "parallel"])) == "injective"


def test_generic_identity_maps_are_elementwise():
    assert classify_kernel(generic([ID, ID, ID], ["parallel", "parallel"])) == "elementwise"


def test_generic_matmul_is_output_fusable():
    k3 = ["affine_map<(d0, d1, d2) -> (d0, d2)>", "affine_map<(d0, d1, d2) -> (d2, d1)>",
          "affine_map<(d0, d1, d2) -> (d0, d1)>"]
    mul_add = "%m = arith.mulf %x, %y : f32\n    %v = arith.addf %m, %z : f32"
    assert classify_kernel(generic(k3, ["parallel", "parallel", "reduction"], mul_add)) == "output_fusable"
    # The same iteration space reducing with max is a plain reduction.
    max_ = "%m = arith.mulf %x, %y : f32\n    %v = arith.maximumf %m, %z : f32"
    assert classify_kernel(generic(k3, ["parallel", "parallel", "reduction"], max_)) == "reduction"


def test_unknown_op_is_opaque():
    body = """
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %o) -> (tensor<4x4xf32>) {
    scf.yield %acc : tensor<4x4xf32>
  }
  return %r : tensor<4x4xf32>"""
    assert classify_kernel(_kernel(body, ARGS, "tensor<4x4xf32>")) == "opaque"


def test_tensor_only_kernel_is_injective():
    body = """
  %c = tensor.collapse_shape %a [[0, 1]] : tensor<4x4xf32> into tensor<16xf32>
  return %c : tensor<16xf32>"""
    assert classify_kernel(_kernel(body, ARGS, "tensor<16xf32>")) == "injective"


def test_strongest_order():
    assert strongest(["elementwise", "broadcast"]) == "broadcast"
    assert strongest(["injective", "reduction", "broadcast"]) == "reduction"
    assert strongest(["output_fusable", "reduction"]) == "output_fusable"
    assert strongest(["opaque", "output_fusable"]) == "opaque"
    assert strongest([]) == "elementwise"


def test_generic_broadcast_input():
    assert classify_kernel(generic([ID, ROW, ID], ["parallel", "parallel"], b_t="tensor<4xf32>")) == "broadcast"
    # Broadcasting one input while writing the output transposed is injective.
    assert classify_kernel(generic([ID, ROW, T], ["parallel", "parallel"], b_t="tensor<4xf32>")) == "injective"
