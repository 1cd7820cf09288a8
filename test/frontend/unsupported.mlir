// RUN: not relax-import-stablehlo %s 2>&1 | FileCheck %s
// CHECK: unsupported StableHLO op 'stablehlo.cholesky' at loc("cholesky_here")

func.func public @main(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = stablehlo.cholesky %arg0, lower = true : tensor<4x4xf32> loc("cholesky_here")
  return %0 : tensor<4x4xf32>
}
