// RUN: relax-opt %s --relax-legalize --relax-lower-shapes | FileCheck %s

// Symbols come from the dims that bind them; other occurrences become checks; call_tir gets
// its symbolic ints and output dims as index operands.
// CHECK-LABEL: func.func @main
// CHECK: %[[N:.*]] = "relax.dim"(%arg0) {axis = 0 : i64}
// CHECK: "relax.assert"(%{{.*}}) {code = 1 : i64, message = "argument #0 dim 1 must be 4"}
// CHECK: %[[N2:.*]] = "relax.dim"(%arg1) {axis = 0 : i64}
// CHECK: %[[EQ:.*]] = arith.cmpi eq, %[[N2]], %[[N]] : index
// CHECK: "relax.assert"(%[[EQ]]) {code = 2 : i64, message = "argument #1 dim 0 must be n (n from argument #0 dim 0)"}
// CHECK: %[[TWO:.*]] = arith.muli %[[N]], %{{.*}} : index
// CHECK: "relax_v.call_tir"(%arg0, %arg1, %[[TWO]]) {callee = @concat, lowered = [2, 0, 1]}
func.func @main(%a: !relax.tensor<["n", 4], f32>, %b: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["?", "?"], f32> {
  %c = "relax_v.concat"(%a, %b) {axis = 0} : (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["?", "?"], f32>
  return %c : !relax.tensor<["?", "?"], f32>
}
