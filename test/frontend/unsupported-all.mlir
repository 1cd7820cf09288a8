// Every unsupported op of a module is reported at once: one diagnostic per op, its count and
// other locations, a custom_call by target; ops in functions @main never calls are not.
// RUN: not relax-import-stablehlo %s 2>&1 | FileCheck %s
// CHECK: unsupported-all.mlir:13:8: error: unsupported StableHLO op 'stablehlo.map' (3 occurrences; also at {{.*}}unsupported-all.mlir:14:8, {{.*}}unsupported-all.mlir:21:8)
// CHECK-NEXT: unsupported-all.mlir:15:8: error: unsupported StableHLO op 'stablehlo.dot'
// CHECK-NEXT: unsupported-all.mlir:17:8: error: unsupported StableHLO op 'stablehlo.custom_call': call target @lapack_sgetrf
// CHECK-NOT: atan2
// CHECK-NOT: error
// (the line numbers above are this file's: keep the functions below where they are)
// ----------------------------------------------------------------------------------------------

func.func public @main(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = "stablehlo.map"(%arg0) ({^bb0(%e: tensor<f32>): stablehlo.return %e : tensor<f32>}) {dimensions = array<i64: 0, 1>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = "stablehlo.map"(%0) ({^bb0(%e: tensor<f32>): stablehlo.return %e : tensor<f32>}) {dimensions = array<i64: 0, 1>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = stablehlo.dot %1, %1 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %3 = call @inner(%2) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %4 = stablehlo.custom_call @lapack_sgetrf(%3) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %4 : tensor<4x4xf32>
}
func.func private @inner(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = "stablehlo.map"(%arg0) ({^bb0(%e: tensor<f32>): stablehlo.return %e : tensor<f32>}) {dimensions = array<i64: 0, 1>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
func.func private @never_called(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = stablehlo.atan2 %arg0, %arg0 : tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
