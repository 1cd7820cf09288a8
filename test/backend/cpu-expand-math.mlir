// RUN: relax-opt %s --relax-legalize --relax-lower-shapes --relax-to-upstream --relax-cpu-vectorize | FileCheck %s

// f32 exp and tanh become vectorizable arith (polynomials through math.fma, no libm call); the
// expansion keeps exp's overflow to +inf and NaN propagation (a select on an ordered compare).
// CHECK-LABEL: func.func private @exp
// CHECK-NOT:   math.exp
// CHECK:       %[[INF:.*]] = arith.constant dense<0x7F800000> : vector<8xf32>
// CHECK:       math.fma
// CHECK:       %[[OVER:.*]] = arith.cmpf ogt
// CHECK:       arith.select %[[OVER]], %[[INF]]
// CHECK:       arith.cmpf oeq
// CHECK-LABEL: func.func private @tanh
// CHECK-NOT:   math.tanh
// CHECK:       math.fma
func.func @main(%x: !relax.tensor<["n", 8], f32>) -> !relax.tensor<["n", 8], f32> {
  %0 = "relax.exp"(%x) : (!relax.tensor<["n", 8], f32>) -> !relax.tensor<["n", 8], f32>
  %1 = "relax.tanh"(%0) : (!relax.tensor<["n", 8], f32>) -> !relax.tensor<["n", 8], f32>
  return %1 : !relax.tensor<["n", 8], f32>
}
