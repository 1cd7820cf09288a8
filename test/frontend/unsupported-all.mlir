// Every unsupported op of a module is reported at once: one diagnostic per op, its count and
// other locations, a custom_call by target; ops in functions @main never calls are not.
// RUN: not relax-import-stablehlo %s 2>&1 | FileCheck %s
// CHECK: a.py:3:1: error: unsupported StableHLO op 'stablehlo.cbrt' (3 occurrences; also at a.py:4:1, b.py:9:2)
// CHECK-NEXT: a.py:5:1: error: unsupported StableHLO op 'stablehlo.tan'
// CHECK-NEXT: a.py:6:1: error: unsupported StableHLO op 'stablehlo.custom_call': call target @lapack_sgetrf
// CHECK-NOT: atan2

func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.cbrt %arg0 : tensor<4xf32> loc("a.py":3:1)
  %1 = stablehlo.cbrt %0 : tensor<4xf32> loc("a.py":4:1)
  %2 = stablehlo.tan %1 : tensor<4xf32> loc("a.py":5:1)
  %3 = call @inner(%2) : (tensor<4xf32>) -> tensor<4xf32>
  %4 = stablehlo.custom_call @lapack_sgetrf(%3) : (tensor<4xf32>) -> tensor<4xf32> loc("a.py":6:1)
  return %4 : tensor<4xf32>
}
func.func private @inner(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.cbrt %arg0 : tensor<4xf32> loc("b.py":9:2)
  return %0 : tensor<4xf32>
}
func.func private @never_called(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.atan2 %arg0, %arg0 : tensor<4xf32> loc("c.py":1:1)
  return %0 : tensor<4xf32>
}
