// RUN: relax-opt %s --split-input-file --relax-infer-shapes | FileCheck %s

// CHECK-LABEL: func.func @symbolic
// CHECK-SAME: -> !relax.tensor<["m + n", "2*d"], f32>
func.func @symbolic(%a: !relax.tensor<["m", "d"], f32>, %b: !relax.tensor<["n", "d"], f32>) -> !relax.tensor<["?", "?"], f32> {
  // CHECK: "relax_v.concat"{{.*}} -> !relax.tensor<["m + n", "d"], f32>
  %c = "relax_v.concat"(%a, %b) {axis = 0} : (!relax.tensor<["m", "d"], f32>, !relax.tensor<["n", "d"], f32>) -> !relax.tensor<["?", "?"], f32>
  // CHECK: "relax_v.concat"{{.*}} -> !relax.tensor<["m + n", "2*d"], f32>
  %d = "relax_v.concat"(%c, %c) {axis = 1} : (!relax.tensor<["?", "?"], f32>, !relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  return %d : !relax.tensor<["?", "?"], f32>
}

// -----

// CHECK-LABEL: func.func @reshape_bs
// CHECK: "relax.reshape"{{.*}} -> !relax.tensor<["b*s", 64], f32>
// CHECK: "relax.matmul"{{.*}} -> !relax.tensor<["b*s", 16], f32>
// CHECK: "relax.sum"{{.*}} -> !relax.tensor<["b*s", 1], f32>
// CHECK: "relax.take"{{.*}} -> !relax.tensor<["b", "s", 16], f32>
func.func @reshape_bs(%x: !relax.tensor<["b", "s", 64], f32>, %w: !relax.tensor<[64, 16], f32>, %ids: !relax.tensor<["b", "s"], i32>) -> !relax.tensor<["?", "?", "?"], f32> {
  %r = "relax.reshape"(%x) {shape = ["b*s", 64]} : (!relax.tensor<["b", "s", 64], f32>) -> !relax.tensor<["?", "?"], f32>
  %m = "relax.matmul"(%r, %w) : (!relax.tensor<["?", "?"], f32>, !relax.tensor<[64, 16], f32>) -> !relax.tensor<["?", "?"], f32>
  %s = "relax.sum"(%m) {axes = [1], keepdims = true} : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  %t = "relax.take"(%m, %ids) {axis = 0} : (!relax.tensor<["?", "?"], f32>, !relax.tensor<["b", "s"], i32>) -> !relax.tensor<["?", "?", "?"], f32>
  return %t : !relax.tensor<["?", "?", "?"], f32>
}

// -----

// Broadcasting (b, 1, d) with (1, s, d); a strided slice's symbolic extent.
// CHECK-LABEL: func.func @broadcast
// CHECK: "relax.add"{{.*}} -> !relax.tensor<["b", "s", "d"], f32>
// CHECK: "relax.strided_slice"{{.*}} -> !relax.tensor<["b", "floordiv(s + 1, 2)", "d"], f32>
func.func @broadcast(%x: !relax.tensor<["b", 1, "d"], f32>, %y: !relax.tensor<[1, "s", "d"], f32>) -> !relax.tensor<["?", "?", "?"], f32> {
  %a = "relax.add"(%x, %y) : (!relax.tensor<["b", 1, "d"], f32>, !relax.tensor<[1, "s", "d"], f32>) -> !relax.tensor<["?", "?", "?"], f32>
  %s = "relax.strided_slice"(%a) {axes = [1], begin = [0], end = ["s"], strides = [2]} : (!relax.tensor<["?", "?", "?"], f32>) -> !relax.tensor<["?", "?", "?"], f32>
  return %s : !relax.tensor<["?", "?", "?"], f32>
}

// -----

// match_cast binds m from an unknown dim; later deduction uses it.
// CHECK-LABEL: func.func @match
// CHECK: "relax.match_cast"{{.*}} -> !relax.tensor<["m", 4], f32>
// CHECK: "relax.exp"{{.*}} -> !relax.tensor<["m", 4], f32>
func.func @match(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["?", "?"], f32> {
  %c = "relax.match_cast"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["m", 4], f32>
  %e = "relax.exp"(%c) : (!relax.tensor<["m", 4], f32>) -> !relax.tensor<["?", "?"], f32>
  return %e : !relax.tensor<["?", "?"], f32>
}
