// RUN: relax-opt %s --split-input-file --relax-legalize | FileCheck %s
// Integer divide never traps: the divisor is made nonzero before an unsigned division of the
// magnitudes, and x / 0 selects -1 (XLA); i1 add is or; i1 compare is unsigned (false < true).

// CHECK-LABEL: func.func private @divide
// CHECK-NOT:   arith.divsi
// CHECK:       %[[Z:.*]] = arith.cmpi eq, %[[B:.*]], %{{.*}} : i32
// CHECK:       %[[S:.*]] = arith.select %[[Z]], %{{.*}}, %{{.*}} : i32
// CHECK:       arith.divui %{{.*}}, %[[S]] : i32
func.func @main(%a: !relax.tensor<["n"], i32>, %b: !relax.tensor<["n"], i32>) -> !relax.tensor<["n"], i32> {
  %r = "relax.divide"(%a, %b) : (!relax.tensor<["n"], i32>, !relax.tensor<["n"], i32>) -> !relax.tensor<["n"], i32>
  return %r : !relax.tensor<["n"], i32>
}

// -----

// CHECK-LABEL: func.func private @add
// CHECK:       arith.ori %{{.*}}, %{{.*}} : i1
// CHECK-NOT:   arith.addi
func.func @main(%a: !relax.tensor<["n"], i1>, %b: !relax.tensor<["n"], i1>) -> !relax.tensor<["n"], i1> {
  %r = "relax.add"(%a, %b) : (!relax.tensor<["n"], i1>, !relax.tensor<["n"], i1>) -> !relax.tensor<["n"], i1>
  return %r : !relax.tensor<["n"], i1>
}

// -----

// CHECK-LABEL: func.func private @less
// CHECK:       arith.cmpi ult, %{{.*}}, %{{.*}} : i1
func.func @main(%a: !relax.tensor<["n"], i1>, %b: !relax.tensor<["n"], i1>) -> !relax.tensor<["n"], i1> {
  %r = "relax.less"(%a, %b) : (!relax.tensor<["n"], i1>, !relax.tensor<["n"], i1>) -> !relax.tensor<["n"], i1>
  return %r : !relax.tensor<["n"], i1>
}
