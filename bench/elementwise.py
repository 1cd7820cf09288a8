"""Benchmark: fused relu(x + b) on 4M float32 (65536 x 64) through the CPU backend vs numpy.

Run: python bench/elementwise.py [--threads N] [--repeat R]
Prints the best time per call for the JIT kernel, for numpy with a temporary
(`np.maximum(x + b, 0)`) and for numpy in place (two passes, no temporary), the ratios, and the
per-call overhead of `JitModule.invoke` on a 1-row input.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("KMP_BLOCKTIME", "0")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from mlir import ir  # noqa: E402

from relax_mlir.backend import cpu  # noqa: E402

MODULE = """
func.func private @add_relu(%x: tensor<?x64xf32>, %b: tensor<64xf32>, %o: tensor<?x64xf32>, %n: index) -> tensor<?x64xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<?x64xf32>, tensor<64xf32>) outs(%o : tensor<?x64xf32>) {
  ^bb0(%a: f32, %c: f32, %out: f32):
    %s = arith.addf %a, %c : f32
    %z = arith.constant 0.0 : f32
    %m = arith.maximumf %s, %z : f32
    linalg.yield %m : f32
  } -> tensor<?x64xf32>
  return %r : tensor<?x64xf32>
}
func.func @main(%in0: memref<?x64xf32>, %in1: memref<64xf32>, %out0: memref<?x64xf32>, %err: memref<1xi32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %t0 = bufferization.to_tensor %in0 restrict : memref<?x64xf32> to tensor<?x64xf32>
  %t1 = bufferization.to_tensor %in1 restrict : memref<64xf32> to tensor<64xf32>
  %n = tensor.dim %t0, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %r = func.call @add_relu(%t0, %t1, %e, %n) : (tensor<?x64xf32>, tensor<64xf32>, tensor<?x64xf32>, index) -> tensor<?x64xf32>
  bufferization.materialize_in_destination %r in restrict writable %out0 : (tensor<?x64xf32>, memref<?x64xf32>) -> ()
  return
}
"""


def best(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None, help="default: RELAX_MLIR_NUM_THREADS or all CPUs")
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--rows", type=int, default=65536)
    args = ap.parse_args()
    options = cpu.CPUOptions() if args.threads is None else cpu.CPUOptions(num_threads=args.threads)
    with ir.Context():
        module = ir.Module.parse(MODULE)
        t0 = time.perf_counter()
        cpu.lower(module, options)
        jit = cpu.JitModule(module, opt_level=options.opt_level)
        compile_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.rows, 64), dtype=np.float32)
    b = rng.standard_normal(64, dtype=np.float32)
    out = np.empty_like(x)
    err = np.zeros(1, np.int32)
    jit.invoke("main", x, b, out, err)
    assert err[0] == 0 and np.array_equal(out, np.maximum(x + b, 0)), "wrong result"

    def numpy_inplace():
        np.add(x, b, out=out)
        np.maximum(out, 0, out=out)

    t_jit = best(lambda: jit.invoke("main", x, b, out, err), args.repeat)
    t_np = best(lambda: np.maximum(x + b, 0), args.repeat)
    t_np_inplace = best(numpy_inplace, args.repeat)
    gbs = 2 * x.nbytes / t_jit / 1e9
    print(f"threads={options.num_threads} elements={x.size} compile={compile_s:.2f}s")
    print(f"jit               {t_jit * 1e3:8.3f} ms  ({gbs:.1f} GB/s read+write)")
    print(f"numpy temp        {t_np * 1e3:8.3f} ms  ratio {t_np / t_jit:.2f}x")
    print(f"numpy in place    {t_np_inplace * 1e3:8.3f} ms  ratio {t_np_inplace / t_jit:.2f}x")

    x1, o1 = x[:1].copy(), out[:1].copy()
    n = 20000
    t0 = time.perf_counter()
    for _ in range(n):
        jit.invoke("main", x1, b, o1, err)
    per_call = (time.perf_counter() - t0) / n
    print(f"invoke overhead   {per_call * 1e6:8.2f} us per call (1 x 64 input)")


if __name__ == "__main__":
    main()
