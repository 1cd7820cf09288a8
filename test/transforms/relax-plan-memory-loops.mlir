// RUN: relax-opt %s --relax-infer-shapes --relax-legalize --relax-plan-memory | FileCheck %s
// RUN: relax-opt %s --relax-infer-shapes --relax-legalize --relax-plan-memory --relax-to-upstream --relax-cpu-vectorize=num_threads=1 --relax-cpu-calls=num_threads=1 --relax-cpu-bufferize=num_threads=1 | FileCheck %s --check-prefix=BUF

// A loop that writes one row of its carried stack per step (lax.scan stacking its outputs) writes
// it in place. The parameters of a region function are its caller's buffers: a dynamic_update_slice
// or scatter whose input is such a parameter, read by nothing after it, gets the in-place flag
// (sym_args = ["1"]) and no storage of its own. Where the parameter is still read afterwards
// (@body_reads_old) or belongs to an entry function (@entry_updates_its_input: the runtime's input
// buffers are read only) the flag stays 0 and the kernel copies its input into planned storage.

// CHECK-LABEL: func.func private @body(
// CHECK-SAME:  %[[I:[a-z0-9]+]]: !relax.tensor<[], i32>, %[[S:[a-z0-9]+]]: !relax.tensor<["n", 3], f32>
// CHECK:       "relax_v.call_tir"(%[[S]], %{{.*}}, %[[I]], %{{.*}}) {callee = @dynamic_update_slice, sym_args = ["1"]}
// CHECK-LABEL: func.func private @body_reads_old(
// CHECK-SAME:  %[[I:[a-z0-9]+]]: !relax.tensor<[], i32>, %[[S:[a-z0-9]+]]: !relax.tensor<["n", 3], f32>
// CHECK:       %[[U:.*]] = "relax_v.call_tir"(%[[S]], %{{.*}}, %[[I]], %{{.*}}) {callee = @dynamic_update_slice, relax.storage = [{{[0-9]+}}], sym_args = ["0"]}
// CHECK:       "relax_v.call_tir"(%[[U]], %[[S]]) {callee = @add_1}
// CHECK-LABEL: func.func private @then_updates(
// CHECK-SAME:  %[[X:[a-z0-9]+]]: !relax.tensor<["n", 3], f32>
// CHECK:       "relax_v.call_tir"(%[[X]], %{{.*}}, %{{.*}}) {callee = @scatter, sym_args = ["1"]}
// CHECK-LABEL: func.func @entry_updates_its_input(
// CHECK-SAME:  %[[X:[a-z0-9]+]]: !relax.tensor<["n", 3], f32>
// CHECK:       "relax_v.call_tir"(%[[X]], {{.*}}) {callee = @dynamic_update_slice, sym_args = ["0"]}

// A called function may return its argument's buffer written in place (@update): the caller's
// `a` keeps its storage block as long as the call's result lives, so no later tensor takes it.
// CHECK-LABEL: func.func @caller(
// CHECK:       "relax_v.call_tir"(%{{.*}}) {callee = @exp{{(_[0-9]+)?}}, relax.storage = [[[A:[0-9]+]]]}
// CHECK:       call @update(
// CHECK-NOT:   relax.storage = [[[A]]]
// CHECK:       return
// CHECK-LABEL: func.func private @update(
// CHECK:       {callee = @dynamic_update_slice{{(_[0-9]+)?}}, sym_args = ["1"]}

// After bufferization the stack is no longer a loop-carried value: the loop writes row i of the
// one buffer (the workspace view the initial value was computed in), and allocates or copies
// nothing T-sized. The loop that reads the old stack still copies it every step.
// BUF-LABEL: func.func @main(
// BUF:       %[[STACK:.*]] = memref.view %{{.*}}[%{{.*}}][%{{.*}}] : memref<?xi8> to memref<?x3xf32>
// BUF:       call @__relax_kernel_multiply(%{{.*}}, %{{.*}}, %[[STACK]])
// BUF:       scf.while (%{{[^)]*}}) : (memref<i32>, i1) -> memref<i32> {
// BUF-NOT:   memref<?x3xf32>
// BUF:       } do {
// BUF-NOT:   memref.alloc(%
// BUF-NOT:   memref.copy {{.*}} : memref<?x3xf32> to memref<?x3xf32>
// BUF:       %[[ROW:.*]] = memref.subview %[[STACK]][%{{.*}}, 0] [1, 3] [1, 1]
// BUF-NOT:   memref.alloc(%
// BUF:       memref.copy %{{.*}}, %[[ROW]]
// BUF-NOT:   memref.alloc(%
// BUF:       scf.yield
// BUF:       scf.while (%{{[^)]*}}) : (memref<i32>, memref<?x3xf32>, i1) -> (memref<i32>, memref<?x3xf32>) {
// BUF:       } do {
// BUF:       memref.alloc(%
// BUF:       scf.yield

func.func @main(%xs: !relax.tensor<["n", 3], f32>, %z: !relax.tensor<["n", 3], f32>) -> (!relax.tensor<["n", 3], f32>, !relax.tensor<["n", 3], f32>) attributes {relax.symbol_lower = {n = 1 : i64}} {
  %c0 = "relax.constant"() {value = dense<0> : tensor<i32>} : () -> !relax.tensor<[], i32>
  %init = "relax.multiply"(%z, %z) : (!relax.tensor<["n", 3], f32>, !relax.tensor<["n", 3], f32>) -> !relax.tensor<["n", 3], f32>
  %w:2 = "relax_v.while"(%c0, %init, %xs) {cond = @cond, body = @body, carried = 2 : i64} : (!relax.tensor<[], i32>, !relax.tensor<["n", 3], f32>, !relax.tensor<["n", 3], f32>) -> (!relax.tensor<[], i32>, !relax.tensor<["n", 3], f32>)
  %init2 = "relax.add"(%z, %z) : (!relax.tensor<["n", 3], f32>, !relax.tensor<["n", 3], f32>) -> !relax.tensor<["n", 3], f32>
  %v:2 = "relax_v.while"(%c0, %init2, %xs) {cond = @cond, body = @body_reads_old, carried = 2 : i64} : (!relax.tensor<[], i32>, !relax.tensor<["n", 3], f32>, !relax.tensor<["n", 3], f32>) -> (!relax.tensor<[], i32>, !relax.tensor<["n", 3], f32>)
  return %w#1, %v#1 : !relax.tensor<["n", 3], f32>, !relax.tensor<["n", 3], f32>
}
func.func private @cond(%i: !relax.tensor<[], i32>, %s: !relax.tensor<["n", 3], f32>, %xs: !relax.tensor<["n", 3], f32>) -> !relax.tensor<[], i1> attributes {relax.region, relax.symbol_lower = {n = 1 : i64}} {
  %n = "relax.arange"() {dtype = i32, end = "n + 1", start = "n"} : () -> !relax.tensor<[1], i32>
  %n0 = "relax.reshape"(%n) {shape = []} : (!relax.tensor<[1], i32>) -> !relax.tensor<[], i32>
  %p = "relax.less"(%i, %n0) : (!relax.tensor<[], i32>, !relax.tensor<[], i32>) -> !relax.tensor<[], i1>
  return %p : !relax.tensor<[], i1>
}
func.func private @body(%i: !relax.tensor<[], i32>, %s: !relax.tensor<["n", 3], f32>, %xs: !relax.tensor<["n", 3], f32>) -> (!relax.tensor<[], i32>, !relax.tensor<["n", 3], f32>) attributes {relax.region, relax.symbol_lower = {n = 1 : i64}} {
  %c0 = "relax.constant"() {value = dense<0> : tensor<i32>} : () -> !relax.tensor<[], i32>
  %c1 = "relax.constant"() {value = dense<1> : tensor<i32>} : () -> !relax.tensor<[], i32>
  %row = "relax.dynamic_slice"(%xs, %i, %c0) {sizes = [1, 3]} : (!relax.tensor<["n", 3], f32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>) -> !relax.tensor<[1, 3], f32>
  %y = "relax.tanh"(%row) : (!relax.tensor<[1, 3], f32>) -> !relax.tensor<[1, 3], f32>
  %s1 = "relax.dynamic_update_slice"(%s, %y, %i, %c0) : (!relax.tensor<["n", 3], f32>, !relax.tensor<[1, 3], f32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>) -> !relax.tensor<["n", 3], f32>
  %i1 = "relax.add"(%i, %c1) : (!relax.tensor<[], i32>, !relax.tensor<[], i32>) -> !relax.tensor<[], i32>
  return %i1, %s1 : !relax.tensor<[], i32>, !relax.tensor<["n", 3], f32>
}
func.func private @body_reads_old(%i: !relax.tensor<[], i32>, %s: !relax.tensor<["n", 3], f32>, %xs: !relax.tensor<["n", 3], f32>) -> (!relax.tensor<[], i32>, !relax.tensor<["n", 3], f32>) attributes {relax.region, relax.symbol_lower = {n = 1 : i64}} {
  %c0 = "relax.constant"() {value = dense<0> : tensor<i32>} : () -> !relax.tensor<[], i32>
  %c1 = "relax.constant"() {value = dense<1> : tensor<i32>} : () -> !relax.tensor<[], i32>
  %row = "relax.dynamic_slice"(%xs, %i, %c0) {sizes = [1, 3]} : (!relax.tensor<["n", 3], f32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>) -> !relax.tensor<[1, 3], f32>
  %s1 = "relax.dynamic_update_slice"(%s, %row, %i, %c0) : (!relax.tensor<["n", 3], f32>, !relax.tensor<[1, 3], f32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>) -> !relax.tensor<["n", 3], f32>
  %s2 = "relax.add"(%s1, %s) : (!relax.tensor<["n", 3], f32>, !relax.tensor<["n", 3], f32>) -> !relax.tensor<["n", 3], f32>
  %i1 = "relax.add"(%i, %c1) : (!relax.tensor<[], i32>, !relax.tensor<[], i32>) -> !relax.tensor<[], i32>
  return %i1, %s2 : !relax.tensor<[], i32>, !relax.tensor<["n", 3], f32>
}

func.func @branch(%p: !relax.tensor<[], i1>, %x: !relax.tensor<["n", 3], f32>, %idx: !relax.tensor<[1, 1], i32>, %u: !relax.tensor<[1, 3], f32>) -> !relax.tensor<["n", 3], f32> {
  %y = "relax.exp"(%x) : (!relax.tensor<["n", 3], f32>) -> !relax.tensor<["n", 3], f32>
  %r = "relax_v.if"(%p, %y, %idx, %u) {then_branch = @then_updates, else_branch = @else_passes} : (!relax.tensor<[], i1>, !relax.tensor<["n", 3], f32>, !relax.tensor<[1, 1], i32>, !relax.tensor<[1, 3], f32>) -> !relax.tensor<["n", 3], f32>
  return %r : !relax.tensor<["n", 3], f32>
}
func.func private @then_updates(%x: !relax.tensor<["n", 3], f32>, %idx: !relax.tensor<[1, 1], i32>, %u: !relax.tensor<[1, 3], f32>) -> !relax.tensor<["n", 3], f32> attributes {relax.region} {
  %s = "relax_v.scatter"(%x, %idx, %u) {combiner = "replace", index_vector_dim = 1 : i64, input_batching_dims = [], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], scatter_indices_batching_dims = [], update_window_dims = [1]} : (!relax.tensor<["n", 3], f32>, !relax.tensor<[1, 1], i32>, !relax.tensor<[1, 3], f32>) -> !relax.tensor<["n", 3], f32>
  return %s : !relax.tensor<["n", 3], f32>
}
func.func private @else_passes(%x: !relax.tensor<["n", 3], f32>, %idx: !relax.tensor<[1, 1], i32>, %u: !relax.tensor<[1, 3], f32>) -> !relax.tensor<["n", 3], f32> attributes {relax.region} {
  return %x : !relax.tensor<["n", 3], f32>
}

func.func @entry_updates_its_input(%x: !relax.tensor<["n", 3], f32>, %u: !relax.tensor<[1, 3], f32>, %i: !relax.tensor<[], i32>) -> !relax.tensor<["n", 3], f32> {
  %s = "relax.dynamic_update_slice"(%x, %u, %i, %i) : (!relax.tensor<["n", 3], f32>, !relax.tensor<[1, 3], f32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>) -> !relax.tensor<["n", 3], f32>
  return %s : !relax.tensor<["n", 3], f32>
}

func.func @caller(%x: !relax.tensor<["n", 4], f32>, %u: !relax.tensor<[1, 4], f32>, %i: !relax.tensor<[], i32>, %w: !relax.tensor<[4, 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %a = "relax.exp"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %b = func.call @update(%a, %u, %i) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[1, 4], f32>, !relax.tensor<[], i32>) -> !relax.tensor<["n", 4], f32>
  %c = "relax.matmul"(%x, %w) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[4, 4], f32>) -> !relax.tensor<["n", 4], f32>
  %d = "relax.matmul"(%c, %w) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[4, 4], f32>) -> !relax.tensor<["n", 4], f32>
  %e = "relax.subtract"(%b, %d) : (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  return %e : !relax.tensor<["n", 4], f32>
}
func.func private @update(%v: !relax.tensor<["n", 4], f32>, %u: !relax.tensor<[1, 4], f32>, %i: !relax.tensor<[], i32>) -> !relax.tensor<["n", 4], f32> {
  %s = "relax.dynamic_update_slice"(%v, %u, %i, %i) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[1, 4], f32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>) -> !relax.tensor<["n", 4], f32>
  return %s : !relax.tensor<["n", 4], f32>
}
