// RUN: relax-opt %s --relax-infer-shapes | FileCheck %s
// RUN: relax-opt %s --relax-infer-shapes --relax-legalize --relax-to-upstream | FileCheck %s --check-prefix=LOWER
// A region function has no error channel: the shape relation its body needs (a slice of 4 from a
// dim of n, which the facts n >= 1 do not bound) moves to the function holding the op, in its
// symbols (the branch's fresh symbol t_s0 for n + 1 maps back to n + 1), and is checked at its entry.

// CHECK-LABEL: func.func @main
// CHECK-SAME: relax.requires = [{lhs = "4", message = "'relax.dynamic_slice' op at {{.*}}: the slice size 4 of dim 0 exceeds the operand's dim t_s0 (checked at the caller's entry: 4 <= n + 1)", rhs = "n + 1"}, {lhs = "4", message = "'relax.dynamic_slice' op at {{.*}}", rhs = "n + 1"}]
// CHECK-LABEL: func.func private @t
// CHECK-NOT: relax.requires
// CHECK-SAME: relax.region
// CHECK-LABEL: func.func private @e
// CHECK-NOT: relax.requires
// CHECK-SAME: relax.region
// LOWER-LABEL: func.func @main
// LOWER-NOT: relax.body_check

func.func @main(%p: !relax.tensor<[], i1>, %x: !relax.tensor<["n"], f32>, %i: !relax.tensor<[], i32>) -> !relax.tensor<[4], f32> attributes {relax.symbol_lower = {n = 1 : i64}} {
  %y = "relax_v.concat"(%x, %x) {axis = 0} : (!relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>) -> !relax.tensor<["2 * n"], f32>
  %z = "relax.strided_slice"(%y) {axes = [0], begin = [0], end = ["n + 1"], strides = [1]} : (!relax.tensor<["2 * n"], f32>) -> !relax.tensor<["n + 1"], f32>
  %s = "relax_v.if"(%p, %z, %i) {then_branch = @t, else_branch = @e}
      : (!relax.tensor<[], i1>, !relax.tensor<["n + 1"], f32>, !relax.tensor<[], i32>) -> !relax.tensor<[4], f32>
  return %s : !relax.tensor<[4], f32>
}
func.func private @t(%v: !relax.tensor<["?"], f32>, %j: !relax.tensor<[], i32>) -> !relax.tensor<[4], f32> attributes {relax.region} {
  %0 = "relax.dynamic_slice"(%v, %j) {sizes = [4]} : (!relax.tensor<["?"], f32>, !relax.tensor<[], i32>) -> !relax.tensor<[4], f32>
  return %0 : !relax.tensor<[4], f32>
}
func.func private @e(%v: !relax.tensor<["?"], f32>, %j: !relax.tensor<[], i32>) -> !relax.tensor<[4], f32> attributes {relax.region} {
  %0 = "relax.dynamic_slice"(%v, %j) {sizes = [4]} : (!relax.tensor<["?"], f32>, !relax.tensor<[], i32>) -> !relax.tensor<[4], f32>
  %1 = "relax.exp"(%0) : (!relax.tensor<[4], f32>) -> !relax.tensor<[4], f32>
  return %1 : !relax.tensor<[4], f32>
}
