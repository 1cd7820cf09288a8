"""Export examples/demo.py's models (the MLP and the transformer block, symbolic batch / sequence
length) as target="cuda" artifacts, ONE compile each, plus numpy reference inputs and outputs at
several shapes (jax.jit on this machine's CPU, highest matmul precision), for bench/gpu_check.py
on a GPU machine without MLIR.

Run: .venv/bin/python bench/export_gpu_artifacts.py [OUT_DIR]   (default: /tmp/relax-mlir-gpu-artifacts;
for a device run pick a folder inside the repo that git ignores, so that it travels)

Layout: OUT_DIR/index.json; OUT_DIR/<model>/{manifest.json,host.json,kernels/*.ptx};
OUT_DIR/<model>/ref_<n>.npz holding arg0..argK and out.
"""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

D, H = 64, 128
RTOL = ATOL = 1e-3


def models(jax, jnp) -> list[dict]:
    """The demo's models: name, function, symbolic specs, inputs at a size n, shapes."""
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((D, H), dtype=np.float32) * 0.1
    w2 = rng.standard_normal((H, D), dtype=np.float32) * 0.1
    g = np.ones(D, np.float32)
    wq, wk, wv = (rng.standard_normal((D, D), dtype=np.float32) * 0.1 for _ in range(3))

    from models import mlp

    from models import transformer_block as block

    def x_of(n):
        return np.random.default_rng(n).standard_normal((n, D), dtype=np.float32)

    S = jax.ShapeDtypeStruct
    f = jnp.float32
    (b,) = jax.export.symbolic_shape("b")
    (s,) = jax.export.symbolic_shape("s")
    return [
        {"name": "mlp", "fn": mlp, "specs": [S((b, D), f), S(w1.shape, f), S(w2.shape, f)],
         "args": lambda n: [x_of(n), w1, w2], "shapes": (1, 7, 64, 256, 1024)},
        {"name": "transformer", "fn": block,
         "specs": [S((s, D), f), S(g.shape, f), S(wq.shape, f), S(wk.shape, f), S(wv.shape, f), S(w1.shape, f),
                   S(w2.shape, f)],
         "args": lambda n: [x_of(n), g, wq, wk, wv, w1, w2], "shapes": (16, 31, 64, 128)},
    ]


def main() -> None:
    out_dir = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "/tmp/relax-mlir-gpu-artifacts")
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_default_matmul_precision", "highest")
    import relax_mlir
    from relax_mlir.frontend.jax import from_jax

    os.makedirs(out_dir, exist_ok=True)
    index = {"models": [], "rtol": RTOL, "atol": ATOL, "reference": f"jax {jax.__version__} cpu, highest precision"}
    for m in models(jax, jnp):
        t0 = time.perf_counter()
        exe = relax_mlir.compile(from_jax(m["fn"], *m["specs"]), target="cuda")
        path = os.path.join(out_dir, m["name"])
        exe.export(path)
        t_compile = time.perf_counter() - t0
        jitted = jax.jit(m["fn"])
        for n in m["shapes"]:
            args = m["args"](n)
            ref = np.asarray(jitted(*args))
            np.savez(os.path.join(path, f"ref_{n}.npz"), out=ref, **{f"arg{i}": a for i, a in enumerate(args)})
        index["models"].append({"name": m["name"], "shapes": list(m["shapes"]), "kernels": len(exe.ptx),
                                "compile_s": t_compile})
        print(f"{m['name']:12s} {len(exe.ptx):3d} PTX kernels, compiled once in {t_compile:.2f} s, "
              f"references at n = {', '.join(map(str, m['shapes']))} -> {path}")
    with open(os.path.join(out_dir, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    print("wrote", os.path.join(out_dir, "index.json"))


if __name__ == "__main__":
    main()
