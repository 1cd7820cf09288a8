// RUN: relax-opt %s --split-input-file --relax-dce | FileCheck %s

// A dead chain goes at once (to a fixpoint); the live op and the match_cast check stay.
// CHECK-LABEL: func.func @dead_chain
// CHECK-SAME:  (%[[X:.*]]: !relax.tensor<["n", 4], f32>)
// CHECK:       %[[C:.*]] = "relax.match_cast"(%[[X]])
// CHECK-NOT:   "relax.exp"
// CHECK-NOT:   "relax.negative"
// CHECK-NOT:   "relax.reshape"
// CHECK:       %[[R:.*]] = "relax.relu"(%[[X]])
// CHECK:       return %[[R]]
func.func @dead_chain(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %c = "relax.match_cast"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["m", 4], f32>
  %0 = "relax.exp"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %1 = "relax.negative"(%0) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %2 = "relax.reshape"(%1) {shape = ["4*n"]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["4*n"], f32>
  %3 = "relax.relu"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  return %3 : !relax.tensor<["n", 4], f32>
}

// -----

// Inside a dataflow block, dead bindings go; a dataflow block whose results are unused goes whole.
// CHECK-LABEL: func.func @dataflow
// CHECK-SAME:  (%[[X:.*]]: !relax.tensor<["n", 4], f32>)
// CHECK:       %[[D:.*]] = "relax_v.dataflow"() ({
// CHECK-NEXT:    %[[N:.*]] = "relax.negative"(%[[X]])
// CHECK-NEXT:    gpu.yield %[[N]]
// CHECK-NOT:   "relax_v.dataflow"
// CHECK-NOT:   "relax.exp"
// CHECK:       return %[[D]]
func.func @dataflow(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %d = "relax_v.dataflow"() ({
    %e = "relax.exp"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
    %n = "relax.negative"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
    gpu.yield %n : !relax.tensor<["n", 4], f32>
  }) : () -> !relax.tensor<["n", 4], f32>
  %u = "relax_v.dataflow"() ({
    %e = "relax.exp"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
    gpu.yield %e : !relax.tensor<["n", 4], f32>
  }) : () -> !relax.tensor<["n", 4], f32>
  return %d : !relax.tensor<["n", 4], f32>
}

// -----

// Impure ops stay even when unused.
// CHECK-LABEL: func.func @impure
// CHECK:       %[[S:.*]] = "relax.alloc_storage"()
// CHECK:       "relax.alloc_tensor"(%[[S]])
// CHECK:       "relax.kill"(%[[S]])
func.func @impure(%x: !relax.tensor<[4], f32>) -> !relax.tensor<[4], f32> {
  %s = "relax.alloc_storage"() {size = 64} : () -> !relax.storage
  %t = "relax.alloc_tensor"(%s) {offset = 0} : (!relax.storage) -> !relax.tensor<[4], f32>
  "relax.kill"(%s) : (!relax.storage) -> ()
  return %x : !relax.tensor<[4], f32>
}

// -----

// A dead call_tir goes, and then so does its kernel; a called kernel and a public func stay.
// CHECK-LABEL: func.func @kernels
// CHECK-SAME:  (%[[X:.*]]: !relax.tensor<[4], f32>)
// CHECK:       %[[K:.*]] = "relax_v.call_tir"(%[[X]]) {callee = @used}
// CHECK-NOT:   "relax_v.call_tir"
// CHECK:       return %[[K]]
// CHECK:       func.func private @used(
// CHECK-NOT:   @unused
// CHECK:       func.func @public_helper(
module {
  func.func @kernels(%x: !relax.tensor<[4], f32>) -> !relax.tensor<[4], f32> {
    %k = "relax_v.call_tir"(%x) {callee = @used} : (!relax.tensor<[4], f32>) -> !relax.tensor<[4], f32>
    %u = "relax_v.call_tir"(%x) {callee = @unused} : (!relax.tensor<[4], f32>) -> !relax.tensor<[4], f32>
    return %k : !relax.tensor<[4], f32>
  }
  func.func private @used(%in0: tensor<4xf32>, %out0: tensor<4xf32>) -> (tensor<4xf32>) attributes {relax.kernel = "exp"} {
    return %in0 : tensor<4xf32>
  }
  func.func private @unused(%in0: tensor<4xf32>, %out0: tensor<4xf32>) -> (tensor<4xf32>) attributes {relax.kernel = "exp"} {
    return %in0 : tensor<4xf32>
  }
  func.func @public_helper(%in0: tensor<4xf32>) -> tensor<4xf32> attributes {relax.kernel = "exp"} {
    return %in0 : tensor<4xf32>
  }
}
