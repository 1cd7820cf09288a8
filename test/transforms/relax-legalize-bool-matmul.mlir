// RUN: relax-opt %s --relax-legalize | FileCheck %s

// A product of booleans is an or of ands (StableHLO dot on i1), never linalg.matmul's add (xor).
// CHECK-LABEL: func.func private @matmul
// CHECK-NOT:   linalg.matmul
// CHECK:       linalg.generic
// CHECK:         %[[P:.*]] = arith.andi %{{.*}}, %{{.*}} : i1
// CHECK:         %[[S:.*]] = arith.ori %{{.*}}, %[[P]] : i1
// CHECK:         linalg.yield %[[S]] : i1
func.func @main(%a: !relax.tensor<["n", 5], i1>, %b: !relax.tensor<[5, 4], i1>) -> !relax.tensor<["n", 4], i1> {
  %0 = "relax.matmul"(%a, %b) : (!relax.tensor<["n", 5], i1>, !relax.tensor<[5, 4], i1>) -> !relax.tensor<["n", 4], i1>
  return %0 : !relax.tensor<["n", 4], i1>
}
