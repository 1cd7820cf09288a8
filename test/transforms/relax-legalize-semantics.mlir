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

// -----

// Bitwise reductions: the accumulator starts at the identity (all bits set for and, 0 for xor),
// the combiner is the bitwise op; unsigned elements compute on the signless type.
// CHECK-LABEL: func.func private @and(
// CHECK:       linalg.fill ins(%{{.*}} : i32)
// CHECK:       linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK:       arith.andi %{{.*}}, %{{.*}} : i32
// CHECK-LABEL: func.func private @xor(
// CHECK:       arith.constant 0 : i8
// CHECK:       arith.xori %{{.*}}, %{{.*}} : i8
func.func @main(%a: !relax.tensor<["n", "k"], i32>, %u: !relax.tensor<["k"], ui8>) -> (!relax.tensor<["n"], i32>, !relax.tensor<[], ui8>) {
  %r = "relax.reduce_bitwise_and"(%a) {axes = [1]} : (!relax.tensor<["n", "k"], i32>) -> !relax.tensor<["n"], i32>
  %x = "relax.reduce_bitwise_xor"(%u) : (!relax.tensor<["k"], ui8>) -> !relax.tensor<[], ui8>
  return %r, %x : !relax.tensor<["n"], i32>, !relax.tensor<[], ui8>
}
