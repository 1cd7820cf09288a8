// RUN: not relax-import-stablehlo %s 2>&1 | FileCheck %s -DFILE=%s
// Element types relax does not support are refused by the importer, every one at once, each at
// its op's position in the input. Complex values are pairs of real parts (a complex argument is
// taken: see import-complex-boundary.mlir); an op without a complex form is refused.
// CHECK: [[FILE]]:12:8: error: unsupported StableHLO op 'stablehlo.convert': result #0 has element type ui4
// CHECK-NEXT: [[FILE]]:13:8: error: unsupported StableHLO op 'stablehlo.iota': result #0 has element type i4
// CHECK-NEXT: [[FILE]]:15:8: error: unsupported StableHLO op 'stablehlo.atan2': on complex numbers (supported:
// CHECK-NOT: error
// CHECK-NOT: Traceback

func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xcomplex<f32>>) -> tensor<4xf32> {
  %0 = stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xui4>
  %1 = stablehlo.iota dim = 0 : tensor<4xi4>
  %2 = stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xcomplex<f32>>
  %3 = stablehlo.atan2 %2, %2 : tensor<4xcomplex<f32>>
  return %arg0 : tensor<4xf32>
}

// RUN: not relax-import-stablehlo %S/Inputs/types-and-ops.mlir 2>&1 | FileCheck %s --check-prefix=BOTH -DFILE=%S/Inputs/types-and-ops.mlir
// An unsupported element type does not hide the unsupported ops: all of them in one error.
// BOTH: [[FILE]]:3:8: error: unsupported StableHLO op 'stablehlo.convert': result #0 has element type f8E4M3FN
// BOTH-NEXT: [[FILE]]:4:8: error: unsupported StableHLO op 'stablehlo.after_all'
// BOTH-NOT: error
