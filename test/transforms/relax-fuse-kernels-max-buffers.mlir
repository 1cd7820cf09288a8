// RUN: relax-opt %s --relax-legalize --relax-fuse-kernels=max_buffers=4 | FileCheck %s
// RUN: relax-opt %s --relax-legalize --relax-fuse-kernels | FileCheck %s --check-prefix=ANY

// A GPU kernel binds each tensor it reads or writes, and devices limit the bindings of one shader
// stage: with max_buffers=4 a chain a + b + c + d (five tensors in one kernel) fuses into a kernel
// of a, b, c and its result, then the last add; without a limit it is one kernel.
// CHECK-LABEL: func.func @sum4
// CHECK-SAME: (%[[A:.*]]: !relax.tensor<["n"], f32>, %[[B:.*]]: !relax.tensor<["n"], f32>, %[[C:.*]]: !relax.tensor<["n"], f32>, %[[D:.*]]: !relax.tensor<["n"], f32>)
// CHECK-NEXT: %[[S:.*]] = "relax_v.call_tir"(%[[A]], %[[B]], %[[C]]) {callee = @fused_add_add}
// CHECK-NEXT: %[[T:.*]] = "relax_v.call_tir"(%[[S]], %[[D]]) {callee = @add}
// CHECK-NEXT: return %[[T]]
// ANY-LABEL: func.func @sum4
// ANY-NEXT: %[[T:.*]] = "relax_v.call_tir"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {callee = @fused_add_add_add}
// ANY-NEXT: return %[[T]]
func.func @sum4(%a: !relax.tensor<["n"], f32>, %b: !relax.tensor<["n"], f32>, %c: !relax.tensor<["n"], f32>, %d: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32> {
  %0 = "relax.add"(%a, %b) : (!relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  %1 = "relax.add"(%0, %c) : (!relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  %2 = "relax.add"(%1, %d) : (!relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  return %2 : !relax.tensor<["n"], f32>
}
