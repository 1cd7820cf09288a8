// RUN: not relax-import-stablehlo %s 2>&1 | FileCheck %s
// CHECK: unsupported StableHLO op 'stablehlo.map' at loc("map_here")

func.func public @main(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = "stablehlo.map"(%arg0) ({^bb0(%e: tensor<f32>): stablehlo.return %e : tensor<f32>}) {dimensions = array<i64: 0, 1>} : (tensor<4x4xf32>) -> tensor<4x4xf32> loc("map_here")
  return %0 : tensor<4x4xf32>
}
