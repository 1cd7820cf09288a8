"""core/script.py: the script view (relax-opt --relax-print=script) is one short line per op."""
import pytest

from mlir import ir

from relax_mlir.core.pipeline import PassRegistry, run_pipeline
from relax_mlir.core.script import to_script, type_text
from relax_mlir.core.session import Session, parse_module
from relax_mlir.transforms import PASSES


def _module(text: str, passes=()):
    session = Session("<test>")
    module = parse_module(session, text)
    assert module is not None, [d.render() for d in session.diags]
    assert run_pipeline(session, module, list(passes), PassRegistry(PASSES)), [d.render() for d in session.diags]
    return session, module


def _ops(op: ir.Operation) -> int:
    n = 0
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                n += 1 + _ops(child.operation)
    return n


def _expected_lines(session, module) -> int:
    """One line per op of each graph function (its return included), one per kernel."""
    with session.ctx:
        n = 0
        for f in module.regions[0].blocks[0].operations:
            f = f.operation
            n += 1 if "relax.kernel" in f.attributes else _ops(f)
        return n


def _op_lines(script: str) -> list[str]:
    return [l for l in script.splitlines()
            if l.strip() and not l.startswith(("def ", "# symbols:"))]


@pytest.fixture(scope="module")
def transformer_text() -> str:
    pytest.importorskip("jax")
    from model_zoo import relax_text

    return relax_text("demo_transformer")


@pytest.mark.parametrize("passes", [
    ("relax-infer-shapes",),
    ("relax-infer-shapes", "relax-canonicalize", "relax-legalize", "relax-fuse-kernels", "relax-dce"),
], ids=["graph", "legalized"])
def test_transformer_block_one_short_line_per_op(transformer_text, passes):
    session, module = _module(transformer_text, passes)
    script = to_script(module)
    lines = [l for l in script.splitlines() if l.strip()]
    assert len(_op_lines(script)) == _expected_lines(session, module)
    mean = sum(map(len, lines)) / len(lines)
    assert mean < 100, f"{mean:.0f} characters per line"
    # A relax op's line is much shorter than in MLIR's generic form.
    with session.ctx:
        generic = [l for l in module.get_asm().splitlines() if '"relax' in l]
    body = [l for l in lines if l.startswith("    ")]
    mean_body, mean_generic = sum(map(len, body)) / len(body), sum(map(len, generic)) / len(generic)
    assert mean_body < 0.6 * mean_generic, (mean_body, mean_generic)
    assert "relax.matmul(" in script or "relax.call_tir(matmul" in script
    assert "(s, 64)" in script and "Tensor[(?" not in script  # deduced symbolic types


def test_small_function():
    text = """
    func.func @f(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["2*n + 1", 4], f32>
        attributes {arg_attrs = [{relax.name = "x"}], relax.symbol_bounds = {n = 64}} {
      %c = "relax.constant"() {value = dense<1.0> : tensor<128x64xf32>} : () -> !relax.tensor<[128, 64], f32>
      %d = "relax.constant"() {value = dense<[1, 2]> : tensor<2xi32>} : () -> !relax.tensor<[2], i32>
      %s = "relax_v.concat"(%x, %x) {axis = 0} : (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["2*n", 4], f32>
      %o = "relax.ones"() {shape = [1, 4], dtype = f32} : () -> !relax.tensor<[1, 4], f32>
      %r = "relax_v.concat"(%s, %o) {axis = 0} : (!relax.tensor<["2*n", 4], f32>, !relax.tensor<[1, 4], f32>) -> !relax.tensor<["2*n + 1", 4], f32>
      return %r : !relax.tensor<["2*n + 1", 4], f32>
    }"""
    session, module = _module(text)
    assert to_script(module).splitlines() == [
        "# symbols: n <= 64",
        'def f(x: Tensor[(n, 4), "f32"]) -> Tensor[(2*n + 1, 4), "f32"]:',
        '    lv0: Tensor[(128, 64), "f32"] = relax.constant(value=<f32[128x64] splat 1.0>)',
        '    lv1: Tensor[(2,), "i32"] = relax.constant(value=[1, 2])',
        '    lv2: Tensor[(2*n, 4), "f32"] = relax.concat(x, x, axis=0)',
        '    lv3: Tensor[(1, 4), "f32"] = relax.ones(dtype="f32", shape=[1, 4])',
        '    lv4: Tensor[(2*n + 1, 4), "f32"] = relax.concat(lv2, lv3, axis=0)',
        "    return lv4",
    ]


def test_large_constant_is_elided():
    values = ", ".join(f"{i}.5" for i in range(12))
    text = f"""
    func.func @f() -> !relax.tensor<[3, 4], f32> {{
      %c = "relax.constant"() {{value = dense<[{values}]> : tensor<12xf32>}} : () -> !relax.tensor<[12], f32>
      %r = "relax.reshape"(%c) {{shape = [3, 4]}} : (!relax.tensor<[12], f32>) -> !relax.tensor<[3, 4], f32>
      return %r : !relax.tensor<[3, 4], f32>
    }}"""
    _, module = _module(text)
    assert 'relax.constant(value=<f32[12]>)' in to_script(module)


def test_type_text():
    with Session().ctx:
        for mlir, want in [('!relax.tensor<["n", "?"], f16>', 'Tensor[(n, ?), "f16"]'),
                           ("!relax.unranked_tensor<i8>", 'Tensor["i8"]'),
                           ('!relax.shape<["n", 4]>', "Shape[(n, 4)]"),
                           ('!relax.prim<"n + 1">', "Prim[n + 1]"),
                           ("!relax.storage", "Storage"),
                           ("tensor<?x64xf32>", "f32[?x64]"),
                           ("memref<4xi32>", "memref i32[4]"),
                           ("index", "index")]:
            assert type_text(ir.Type.parse(mlir)) == want
