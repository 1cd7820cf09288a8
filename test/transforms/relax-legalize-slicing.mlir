// RUN: relax-opt %s --relax-infer-shapes --relax-legalize | FileCheck %s
// RUN: relax-opt %s --relax-infer-shapes --relax-legalize --relax-plan-memory | FileCheck %s --check-prefix=PLAN

// dynamic_update_slice: x copied into the destination unless the in-place flag (symbolic arg 0)
// is set, each start clamped into [0, dim - update dim], the update inserted. The planner sets the
// flag where x dies at the call (%c2 here) and keeps 0 where x is used later (%c1).
// CHECK-LABEL: func.func @main
// CHECK: %[[C1:.*]] = "relax_v.call_tir"
// CHECK: %[[C2:.*]] = "relax_v.call_tir"(%[[C1]], %{{.*}}, %{{.*}}, %{{.*}}) {callee = @dynamic_update_slice, sym_args = ["0"]} : {{.*}} -> !relax.tensor<["n", 4], f32>
// CHECK: "relax_v.call_tir"(%[[C2]], %{{.*}}, %{{.*}}, %{{.*}}) {callee = @dynamic_update_slice, sym_args = ["0"]}
// CHECK: "relax_v.call_tir"({{.*}}) {callee = @pad}
// CHECK: "relax_v.call_tir"({{.*}}) {callee = @reverse}
// CHECK: "relax_v.call_tir"({{.*}}) {callee = @dynamic_slice}
// CHECK-LABEL: func.func private @dynamic_update_slice
// CHECK-SAME: (%[[X:.*]]: tensor<?x4xf32>, %[[U:.*]]: tensor<1x4xf32>, %[[P:.*]]: tensor<i32>, %[[Q:.*]]: tensor<i32>, %[[OUT:.*]]: tensor<?x4xf32>, %[[FLAG:.*]]: index)
// CHECK: %[[INPL:.*]] = arith.cmpi ne, %[[FLAG]]
// CHECK: %[[ACC:.*]] = scf.if %[[INPL]] -> (tensor<?x4xf32>) {
// CHECK-NEXT: scf.yield %[[X]] : tensor<?x4xf32>
// CHECK: linalg.generic {{.*}} ins(%[[X]] : tensor<?x4xf32>) outs(%[[OUT]] : tensor<?x4xf32>)
// CHECK: %[[S:.*]] = tensor.extract %[[P]][] : tensor<i32>
// CHECK: %[[SI:.*]] = arith.index_cast %[[S]] : i32 to index
// CHECK: %[[HI:.*]] = arith.subi %{{.*}}, %{{.*}} : index
// CHECK: %[[NEG:.*]] = arith.cmpi slt, %[[SI]], %{{.*}} : index
// CHECK: %[[LO:.*]] = arith.select %[[NEG]], %{{.*}}, %[[SI]] : index
// CHECK: %[[BIG:.*]] = arith.cmpi sgt, %[[LO]], %[[HI]] : index
// CHECK: %[[CL:.*]] = arith.select %[[BIG]], %[[HI]], %[[LO]] : index
// CHECK: tensor.extract_slice %[[ACC]][%[[CL]], %{{.*}}] [1, 4] [1, 1]
// CHECK: tensor.insert_slice %{{.*}} into %[[ACC]][%[[CL]], %{{.*}}] [1, 4] [1, 1]
// CHECK-LABEL: func.func private @pad
// CHECK: scf.if
// CHECK: tensor.extract
// CHECK: } else {
// CHECK-LABEL: func.func private @reverse
// CHECK: arith.subi
// CHECK: tensor.extract
// CHECK-LABEL: func.func private @dynamic_slice
// CHECK: tensor.extract_slice %{{.*}}[%{{.*}}, %{{.*}}] [1, 3] [1, 1] : tensor<?x4xf32> to tensor<1x3xf32>

// PLAN-LABEL: func.func @main
// PLAN: callee = @dynamic_update_slice, relax.storage = [{{[0-9]+}}], sym_args = ["0"]
// PLAN: callee = @dynamic_update_slice, relax.storage = [{{[0-9]+}}], sym_args = ["1"]

func.func @main(%c: !relax.tensor<["n", 4], f32>, %a: !relax.tensor<[1, 4], f32>, %p: !relax.tensor<[], i32>, %z: !relax.tensor<[], i32>, %v: !relax.tensor<[], f32>) -> (!relax.tensor<["n", 4], f32>, !relax.tensor<["2*n + 1", 4], f32>, !relax.tensor<["n", 4], f32>, !relax.tensor<[1, 3], f32>) attributes {relax.symbol_lower = {n = 1 : i64}} {
  %c1 = "relax.add"(%c, %c) : (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %c2 = "relax.dynamic_update_slice"(%c1, %a, %p, %z) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[1, 4], f32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>) -> !relax.tensor<["n", 4], f32>
  %c3 = "relax.dynamic_update_slice"(%c2, %a, %z, %z) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[1, 4], f32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>) -> !relax.tensor<["n", 4], f32>
  %o = "relax.add"(%c3, %c1) : (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %pd = "relax.pad"(%c1, %v) {low = [2, 0], high = [0, 0], interior = [1, 0]} : (!relax.tensor<["n", 4], f32>, !relax.tensor<[], f32>) -> !relax.tensor<["2*n + 1", 4], f32>
  %r = "relax.reverse"(%c1) {dimensions = [0]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %s = "relax.dynamic_slice"(%c1, %p, %z) {sizes = [1, 3]} : (!relax.tensor<["n", 4], f32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>) -> !relax.tensor<[1, 3], f32>
  return %o, %pd, %r, %s : !relax.tensor<["n", 4], f32>, !relax.tensor<["2*n + 1", 4], f32>, !relax.tensor<["n", 4], f32>, !relax.tensor<[1, 3], f32>
}
