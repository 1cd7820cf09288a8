"""CPU artifacts: exported, loaded in a fresh Python process that never imports mlir."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np

import relax_mlir

SRC = """
func.func @main(%x: !relax.tensor<["n", 16], f32>, %w: !relax.tensor<[16, 8], f32>, %b: !relax.tensor<[8], f32>) -> !relax.tensor<["?", "?"], f32> {
  %m = "relax.matmul"(%x, %w) : (!relax.tensor<["n", 16], f32>, !relax.tensor<[16, 8], f32>) -> !relax.tensor<["?", "?"], f32>
  %a = "relax.add"(%m, %b) : (!relax.tensor<["?", "?"], f32>, !relax.tensor<[8], f32>) -> !relax.tensor<["?", "?"], f32>
  %s = "relax.softmax"(%a) {axis = -1} : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  return %s : !relax.tensor<["?", "?"], f32>
}
"""


def test_export_and_load_without_mlir(tmp_path):
    exe = relax_mlir.compile(SRC, optimize=False)
    art = tmp_path / "mlp"
    exe.export(str(art))
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    np.save(tmp_path / "w.npy", w)
    np.save(tmp_path / "b.npy", b)
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        from relax_mlir.runtime import load
        exe = load({str(art)!r})
        w, b = np.load({str(tmp_path / 'w.npy')!r}), np.load({str(tmp_path / 'b.npy')!r})
        for n in (1, 13, 300):
            x = np.random.default_rng(n).standard_normal((n, 16)).astype(np.float32)
            a = x @ w + b
            e = np.exp(a - a.max(-1, keepdims=True))
            np.testing.assert_allclose(exe(x, w, b), e / e.sum(-1, keepdims=True), rtol=1e-4, atol=1e-5)
        try:
            exe(np.zeros((3, 15), np.float32), w, b)
            raise SystemExit("no error")
        except ValueError as err:
            assert "dim 1 must be 16" in str(err), err
        assert not any(m == "mlir" or m.startswith("mlir.") for m in sys.modules), "mlir was imported"
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
