// RUN: not relax-import-stablehlo %s 2>&1 | FileCheck %s
// CHECK: unsupported StableHLO op 'stablehlo.cbrt' at loc("cube_root_here")

func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.cbrt %arg0 : tensor<4xf32> loc("cube_root_here")
  return %0 : tensor<4xf32>
}
