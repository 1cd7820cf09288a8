"""relax-fuse-kernels on long elementwise chains: a chain of 1,500 ops fuses into one kernel (in a
subprocess with a generous timeout, so a return of the old quadratic-or-worse behaviour fails
instead of hanging), and a fused long chain computes what numpy does."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np

import relax_mlir

T = '!relax.tensor<["n", 8], f32>'
U = '!relax.tensor<["?", "?"], f32>'
_UNARY = ("relax.tanh", "relax.relu", "relax.negative", "relax.sigmoid")


def chain_program(n_ops: int) -> str:
    """x -> tanh -> relu -> (+ y) -> negative -> sigmoid -> (+ y) ... : `n_ops` ops, every third
    an add of the side input `y` (a fused kernel reads it once)."""
    lines = [f"func.func @main(%x: {T}, %y: {T}) -> {U} {{"]
    prev, pt = "%x", T
    for i in range(n_ops):
        if i % 3 == 2:
            lines.append(f'  %v{i} = "relax.add"({prev}, %y) : ({pt}, {T}) -> {U}')
        else:
            lines.append(f'  %v{i} = "{_UNARY[i % 4]}"({prev}) : ({pt}) -> {U}')
        prev, pt = f"%v{i}", U
    lines.append(f"  return {prev} : {U}\n}}")
    return "\n".join(lines)


def chain_reference(n_ops: int, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    v = x.astype(np.float64)
    for i in range(n_ops):
        if i % 3 == 2:
            v = v + y
        else:
            op = _UNARY[i % 4]
            v = {"relax.tanh": np.tanh, "relax.relu": lambda a: np.maximum(a, 0), "relax.negative": np.negative,
                 "relax.sigmoid": lambda a: 1 / (1 + np.exp(-a))}[op](v)
    return v


def test_chain_of_1500_fuses_into_one_kernel(tmp_path):
    src = tmp_path / "chain.mlir"
    src.write_text(chain_program(1500))
    script = textwrap.dedent(f"""
        import sys
        from relax_mlir.tools.relax_opt import main
        sys.exit(main([{str(src)!r}, "--pass-pipeline=builtin.module(relax-infer-shapes,relax-legalize,relax-fuse-kernels)",
                       "-o", {str(tmp_path / "out.mlir")!r}]))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = (tmp_path / "out.mlir").read_text()
    assert out.count('"relax_v.call_tir"') == 1
    assert out.count("func.func private") == 1  # every unfused kernel is gone
    assert out.count("linalg.generic") == 1
    n_tanh = sum(1 for i in range(1500) if i % 3 != 2 and i % 4 == 0)
    assert out.count("math.tanh") == n_tanh


def test_fused_long_chain_numerics():
    n_ops = 120
    exe = relax_mlir.compile(chain_program(n_ops))
    rng = np.random.default_rng(0)
    for n in (1, 13, 257, 0):
        x = rng.standard_normal((n, 8)).astype(np.float32)
        y = rng.standard_normal((n, 8)).astype(np.float32)
        got = exe(x, y)
        assert got.shape == (n, 8)
        np.testing.assert_allclose(got, chain_reference(n_ops, x, y), rtol=1e-4, atol=1e-5)
