"""Export every test model (test/python/model_zoo.py: the JAX test models and examples/demo.py's
MLP, transformer block and KV-cache decoder, all with symbolic dims) as target="cuda" artifacts,
ONE compile each, plus numpy reference inputs and outputs at several shapes (jax.jit on this
machine's CPU, highest matmul precision), for bench/gpu_check.py on a GPU machine without MLIR.

Run: .venv/bin/python bench/export_gpu_artifacts.py [OUT_DIR] [--target cuda|vulkan]
(default: /tmp/relax-mlir-gpu-artifacts, cuda; for a device run pick a folder inside the repo that
git ignores, so that it travels). With --target vulkan the same check runs here on lavapipe,
which tries the whole check but CuPy before a GPU is lent.

Layout: OUT_DIR/index.json; OUT_DIR/<model>/{manifest.json,host.json,kernels/*.ptx};
OUT_DIR/<model>/ref_<n>.npz holding arg0..argK and out0..outM.
"""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "python"))

RTOL, ATOL = 1e-3, 1e-3
# The demo's models are also timed at larger shapes than the tests use.
BENCH_SIZES = {"demo_mlp": (1, 7, 64, 256, 1024), "demo_transformer": (16, 31, 64, 128, 512),
               "demo_decoder": (1, 16, 127, 512, 2048)}


def sizes(name: str, zoo) -> tuple[int, ...]:
    return BENCH_SIZES.get(name, zoo.MODELS[name].sizes)


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir", nargs="?", default="/tmp/relax-mlir-gpu-artifacts")
    ap.add_argument("--target", choices=("cuda", "vulkan"), default="cuda")
    ap.add_argument("--models", default=None, help="comma-separated names (default: all)")
    a = ap.parse_args()
    out_dir = os.path.abspath(a.out_dir)
    import jax

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_default_matmul_precision", "highest")
    import model_zoo as zoo

    import relax_mlir

    os.makedirs(out_dir, exist_ok=True)
    index = {"models": [], "rtol": RTOL, "atol": ATOL, "target": a.target,
             "reference": f"jax {jax.__version__} cpu, highest precision"}
    names = a.models.split(",") if a.models else list(zoo.MODELS)
    for name in names:
        m = zoo.MODELS[name]
        t0 = time.perf_counter()
        exe = relax_mlir.compile(zoo.relax_text(name), target=a.target)
        kernels = len(exe.ptx if a.target == "cuda" else exe.artifacts["spirv"])
        path = os.path.join(out_dir, name)
        exe.export(path)
        t_compile = time.perf_counter() - t0
        jitted = jax.jit(m.fn)
        for n in sizes(name, zoo):
            args = m.args(n)
            outs = zoo.as_list(jitted(*args))
            np.savez(os.path.join(path, f"ref_{n}.npz"), **{f"arg{i}": a for i, a in enumerate(args)},
                     **{f"out{i}": np.asarray(o) for i, o in enumerate(outs)})
        index["models"].append({"name": name, "shapes": list(sizes(name, zoo)), "kernels": kernels,
                                "compile_s": t_compile})
        print(f"{name:18s} {kernels:3d} {a.target} kernels, compiled once in {t_compile:.2f} s, "
              f"references at n = {', '.join(map(str, sizes(name, zoo)))} -> {path}", flush=True)
    with open(os.path.join(out_dir, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    print("wrote", os.path.join(out_dir, "index.json"))


if __name__ == "__main__":
    main()
