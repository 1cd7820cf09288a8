// RUN: relax-opt %s --relax-legalize --relax-plan-memory | FileCheck %s

// A kernel that only copies a slice of its input becomes a view of that input once kernels are
// inlined (canonicalization erases the identity copy), so the sliced tensor keeps its source's
// block alive as long as the slice lives: %tanh must not take block 0 while %slice is read.
// CHECK-LABEL: func.func @slice_keeps_source_alive
// CHECK-SAME: blocks = [65536, 676, 676]
// CHECK: %[[E:.*]] = "relax_v.call_tir"(%arg0) {callee = @exp, relax.storage = [0]}
// CHECK: %[[S:.*]] = "relax_v.call_tir"(%[[E]]) {callee = @strided_slice, relax.storage = [1]}
// CHECK: %[[T:.*]] = "relax_v.call_tir"(%arg1) {callee = @tanh, relax.storage = [2]}
// CHECK: "relax_v.call_tir"(%[[S]], %[[T]]) {callee = @add}
func.func @slice_keeps_source_alive(%x: !relax.tensor<[128, 128], f32>, %y: !relax.tensor<[13, 13], f32>) -> !relax.tensor<[13, 13], f32> {
  %0 = "relax.exp"(%x) : (!relax.tensor<[128, 128], f32>) -> !relax.tensor<[128, 128], f32>
  %1 = "relax.strided_slice"(%0) {axes = [0, 1], begin = [0, 0], end = [13, 13], strides = [1, 1]} : (!relax.tensor<[128, 128], f32>) -> !relax.tensor<[13, 13], f32>
  %2 = "relax.tanh"(%y) : (!relax.tensor<[13, 13], f32>) -> !relax.tensor<[13, 13], f32>
  %3 = "relax.add"(%1, %2) : (!relax.tensor<[13, 13], f32>, !relax.tensor<[13, 13], f32>) -> !relax.tensor<[13, 13], f32>
  return %3 : !relax.tensor<[13, 13], f32>
}
