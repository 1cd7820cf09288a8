// RUN: relax-opt %s --split-input-file --relax-cse | FileCheck %s

// Identical pure ops merge, and so do the ops that become identical through them.
// CHECK-LABEL: func.func @merge
// CHECK-SAME:  (%[[X:.*]]: !relax.tensor<["n", 4], f32>)
// CHECK:       %[[E:.*]] = "relax.exp"(%[[X]])
// CHECK-NEXT:  %[[N:.*]] = "relax.negative"(%[[E]])
// CHECK-NEXT:  %[[A:.*]] = "relax.add"(%[[N]], %[[N]])
// CHECK-NEXT:  return %[[A]]
func.func @merge(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %0 = "relax.exp"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %1 = "relax.exp"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %2 = "relax.negative"(%0) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %3 = "relax.negative"(%1) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %4 = "relax.add"(%2, %3) : (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  return %4 : !relax.tensor<["n", 4], f32>
}

// -----

// Different attributes, operand order or result types keep ops apart.
// CHECK-LABEL: func.func @distinct
// CHECK-SAME:  (%[[X:.*]]: !relax.tensor<[2, 3], f32>, %[[Y:.*]]: !relax.tensor<[2, 3], f32>)
// CHECK:       %[[P:.*]] = "relax.permute_dims"(%[[X]]) {axes = [1, 0]}
// CHECK:       %[[R:.*]] = "relax.reshape"(%[[X]]) {shape = [3, 2]}
// CHECK:       %[[S1:.*]] = "relax.subtract"(%[[X]], %[[Y]])
// CHECK:       %[[S2:.*]] = "relax.subtract"(%[[Y]], %[[X]])
// CHECK:       %[[C1:.*]] = "relax.astype"(%[[X]]) {dtype = f16}
// CHECK:       %[[C2:.*]] = "relax.astype"(%[[X]]) {dtype = f64}
func.func @distinct(%x: !relax.tensor<[2, 3], f32>, %y: !relax.tensor<[2, 3], f32>) -> (!relax.tensor<[3, 2], f32>, !relax.tensor<[3, 2], f32>, !relax.tensor<[2, 3], f32>, !relax.tensor<[2, 3], f32>, !relax.tensor<[2, 3], f16>, !relax.tensor<[2, 3], f64>) {
  %0 = "relax.permute_dims"(%x) {axes = [1, 0]} : (!relax.tensor<[2, 3], f32>) -> !relax.tensor<[3, 2], f32>
  %1 = "relax.reshape"(%x) {shape = [3, 2]} : (!relax.tensor<[2, 3], f32>) -> !relax.tensor<[3, 2], f32>
  %2 = "relax.subtract"(%x, %y) : (!relax.tensor<[2, 3], f32>, !relax.tensor<[2, 3], f32>) -> !relax.tensor<[2, 3], f32>
  %3 = "relax.subtract"(%y, %x) : (!relax.tensor<[2, 3], f32>, !relax.tensor<[2, 3], f32>) -> !relax.tensor<[2, 3], f32>
  %4 = "relax.astype"(%x) {dtype = f16} : (!relax.tensor<[2, 3], f32>) -> !relax.tensor<[2, 3], f16>
  %5 = "relax.astype"(%x) {dtype = f64} : (!relax.tensor<[2, 3], f32>) -> !relax.tensor<[2, 3], f64>
  return %0, %1, %2, %3, %4, %5 : !relax.tensor<[3, 2], f32>, !relax.tensor<[3, 2], f32>, !relax.tensor<[2, 3], f32>, !relax.tensor<[2, 3], f32>, !relax.tensor<[2, 3], f16>, !relax.tensor<[2, 3], f64>
}

// -----

// Identical call_tir merge; impure alloc_tensor never does.
// CHECK-LABEL: func.func @calls
// CHECK-SAME:  (%[[X:.*]]: !relax.tensor<[4], f32>)
// CHECK:       %[[K:.*]] = "relax_v.call_tir"(%[[X]]) {callee = @k}
// CHECK-NOT:   "relax_v.call_tir"
// CHECK:       %[[S:.*]] = "relax.alloc_storage"()
// CHECK:       %[[T1:.*]] = "relax.alloc_tensor"(%[[S]])
// CHECK:       %[[T2:.*]] = "relax.alloc_tensor"(%[[S]])
// CHECK:       return %[[K]], %[[K]], %[[T1]], %[[T2]]
module {
  func.func @calls(%x: !relax.tensor<[4], f32>) -> (!relax.tensor<[4], f32>, !relax.tensor<[4], f32>, !relax.tensor<[4], f32>, !relax.tensor<[4], f32>) {
    %0 = "relax_v.call_tir"(%x) {callee = @k} : (!relax.tensor<[4], f32>) -> !relax.tensor<[4], f32>
    %1 = "relax_v.call_tir"(%x) {callee = @k} : (!relax.tensor<[4], f32>) -> !relax.tensor<[4], f32>
    %s = "relax.alloc_storage"() {size = 64} : () -> !relax.storage
    %t1 = "relax.alloc_tensor"(%s) {offset = 0} : (!relax.storage) -> !relax.tensor<[4], f32>
    %t2 = "relax.alloc_tensor"(%s) {offset = 0} : (!relax.storage) -> !relax.tensor<[4], f32>
    return %0, %1, %t1, %t2 : !relax.tensor<[4], f32>, !relax.tensor<[4], f32>, !relax.tensor<[4], f32>, !relax.tensor<[4], f32>
  }
  func.func private @k(%in0: tensor<4xf32>, %out0: tensor<4xf32>) -> (tensor<4xf32>) attributes {relax.kernel = "exp"} {
    return %in0 : tensor<4xf32>
  }
}

// -----

// An op inside a dataflow block merges into an identical one before the block.
// CHECK-LABEL: func.func @nested
// CHECK-SAME:  (%[[X:.*]]: !relax.tensor<["n", 4], f32>)
// CHECK:       %[[E:.*]] = "relax.exp"(%[[X]])
// CHECK:       "relax_v.dataflow"() ({
// CHECK-NEXT:    %[[N:.*]] = "relax.negative"(%[[E]])
// CHECK-NEXT:    gpu.yield %[[N]]
func.func @nested(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %e = "relax.exp"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %d = "relax_v.dataflow"() ({
    %e2 = "relax.exp"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
    %n = "relax.negative"(%e2) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
    gpu.yield %n : !relax.tensor<["n", 4], f32>
  }) : () -> !relax.tensor<["n", 4], f32>
  %a = "relax.add"(%e, %d) : (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  return %a : !relax.tensor<["n", 4], f32>
}
