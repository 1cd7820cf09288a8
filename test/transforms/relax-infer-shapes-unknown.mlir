// RUN: relax-opt %s --split-input-file --relax-infer-shapes | FileCheck %s
// RUN: relax-opt %s --split-input-file --pass-pipeline='builtin.module(relax-infer-shapes,relax-legalize,relax-lower-shapes)' | FileCheck %s --check-prefix=LOWER

// A "?" operand dim that a deduction unifies with a known dim is refined by a match_cast before
// the op; relax-lower-shapes turns it into a check in the entry prologue.
// CHECK-LABEL: func.func @add_unknown
// CHECK-SAME: (%[[X:.*]]: !relax.tensor<["?", "?"], f32>, %[[Y:.*]]: !relax.tensor<[4, 8], f32>) -> !relax.tensor<[4, 8], f32>
// CHECK: %[[C:.*]] = "relax.match_cast"(%[[X]]) {relax.origin = "'relax.add' op operand #0 ('lhs')"{{.*}}} : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<[4, 8], f32>
// CHECK: "relax.add"(%[[C]], %[[Y]])
// LOWER-LABEL: func.func @add_unknown
// LOWER: %[[D0:.*]] = "relax.dim"(%arg0) {axis = 0 : i64}
// LOWER: %[[P0:.*]] = arith.cmpi eq, %[[D0]], %{{.*}} : index
// LOWER: "relax.assert"(%[[P0]]) {{{.*}}message = "'relax.add' op operand #0 ('lhs') = argument #0 at {{.*}}: dim 0 must be 4 (it is '?' in the signature; a '?' dim is not broadcast from 1 at run time)"}
// LOWER: "relax.assert"({{.*}}message = "'relax.add' op operand #0 ('lhs') = argument #0 at {{.*}}: dim 1 must be 8
// LOWER: "relax_v.call_tir"
func.func @add_unknown(%x: !relax.tensor<["?", "?"], f32>, %y: !relax.tensor<[4, 8], f32>) -> !relax.tensor<["?", "?"], f32> {
  %0 = "relax.add"(%x, %y) : (!relax.tensor<["?", "?"], f32>, !relax.tensor<[4, 8], f32>) -> !relax.tensor<["?", "?"], f32>
  return %0 : !relax.tensor<["?", "?"], f32>
}

// -----

// Only the dim the deduction needs is pinned; a symbol on the other side is the pattern.
// CHECK-LABEL: func.func @where_symbolic
// CHECK: %[[C:.*]] = "relax.match_cast"(%arg0) {{.*}} -> !relax.tensor<["n"], i1>
// CHECK: "relax.where"(%[[C]], %arg1, %arg2) {{.*}} -> !relax.tensor<["n"], f32>
func.func @where_symbolic(%c: !relax.tensor<["?"], i1>, %x: !relax.tensor<["n"], f32>, %y: !relax.tensor<["n"], f32>) -> !relax.tensor<["?"], f32> {
  %0 = "relax.where"(%c, %x, %y) : (!relax.tensor<["?"], i1>, !relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>) -> !relax.tensor<["?"], f32>
  return %0 : !relax.tensor<["?"], f32>
}

// -----

// Reshape: the one unknown dim is the element count over the known ones.
// CHECK-LABEL: func.func @reshape_unknown
// CHECK: %[[C:.*]] = "relax.match_cast"(%arg0) {relax.origin = "'relax.reshape' op operand #0", relax.reason = "the element counts must be equal"} : (!relax.tensor<["?"], f32>) -> !relax.tensor<[50000000], f32>
// CHECK: "relax.reshape"(%[[C]])
// LOWER-LABEL: func.func @reshape_unknown
// LOWER: "relax.assert"({{.*}}message = "'relax.reshape' op operand #0 = argument #0 at {{.*}}: dim 0 must be 50000000 (it is '?' in the signature; the element counts must be equal)"}
func.func @reshape_unknown(%x: !relax.tensor<["?"], f32>) -> !relax.tensor<["?"], f32> {
  %0 = "relax.reshape"(%x) {shape = [50000000]} : (!relax.tensor<["?"], f32>) -> !relax.tensor<["?"], f32>
  return %0 : !relax.tensor<["?"], f32>
}

// -----

// Matmul: an unknown inner dim must be the other operand's; batch dims follow the result.
// CHECK-LABEL: func.func @matmul_unknown
// CHECK: %[[A:.*]] = "relax.match_cast"(%arg0) {{.*}} -> !relax.tensor<["b", 4, 8], f32>
// CHECK: "relax.matmul"(%[[A]], %arg1) {{.*}} -> !relax.tensor<["b", 4, 3], f32>
func.func @matmul_unknown(%a: !relax.tensor<["?", 4, "?"], f32>, %w: !relax.tensor<["b", 8, 3], f32>) -> !relax.tensor<["?", "?", "?"], f32> {
  %0 = "relax.matmul"(%a, %w) : (!relax.tensor<["?", 4, "?"], f32>, !relax.tensor<["b", 8, 3], f32>) -> !relax.tensor<["?", "?", "?"], f32>
  return %0 : !relax.tensor<["?", "?", "?"], f32>
}

// -----

// A reduced or gathered-from dim is read by the kernel at run time: no check.
// CHECK-LABEL: func.func @free_dims
// CHECK-NOT: relax.match_cast
// CHECK: "relax.sum"(%arg0)
// CHECK: "relax.take"(%arg0, %arg1)
func.func @free_dims(%x: !relax.tensor<["?", 3], f32>, %i: !relax.tensor<["k"], i32>) -> (!relax.tensor<["?"], f32>, !relax.tensor<["?", "?"], f32>) {
  %0 = "relax.sum"(%x) {axes = [0]} : (!relax.tensor<["?", 3], f32>) -> !relax.tensor<["?"], f32>
  %1 = "relax.take"(%x, %i) : (!relax.tensor<["?", 3], f32>, !relax.tensor<["k"], i32>) -> !relax.tensor<["?", "?"], f32>
  return %0, %1 : !relax.tensor<["?"], f32>, !relax.tensor<["?", "?"], f32>
}
