// RUN: relax-opt %s --split-input-file --relax-infer-shapes --relax-legalize --relax-plan-memory --relax-to-upstream | FileCheck %s
// RUN: relax-opt %s --split-input-file --relax-infer-shapes --relax-legalize --relax-plan-memory --relax-to-upstream --relax-cpu-vectorize --relax-cpu-calls --relax-cpu-bufferize | FileCheck %s --check-prefix=BUF

// A KV-cache decode step with the cache donated (relax.donate = 0: result 0 is written into
// argument 0's buffer). The cache enters writable, dynamic_update_slice runs with its in-place
// flag set (the trailing index argument is 1: no copy of the operand into the destination), the
// result is materialized into the cache's own memref; the output memref is left unused.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[CACHE:[a-z0-9_]+]]: memref<?x?x4x8xf32>, %[[KV:[a-z0-9_]+]]: memref<?x1x4x8xf32>, %[[POS:[a-z0-9_]+]]: memref<i32>, %[[OUT:[a-z0-9_]+]]: memref<?x?x4x8xf32>, %[[ERR:[a-z0-9_]+]]: memref<1xi32>)
// CHECK-SAME: relax.arg_attrs = [{relax.donate = 0 : i64}, {}, {}]
// CHECK: %[[C:.*]] = bufferization.to_tensor %[[CACHE]] restrict writable
// CHECK: %[[K:.*]] = bufferization.to_tensor %[[KV]] restrict :
// CHECK: scf.if
// CHECK:   %[[ONE:.*]] = arith.constant 1 : index
// CHECK:   %[[R:.*]] = func.call @dynamic_update_slice(%[[C]], %[[K]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ONE]])
// CHECK:   bufferization.materialize_in_destination %[[R]] in writable %[[CACHE]]
// CHECK-NOT: %[[OUT]]
// CHECK: } else {

// After bufferization the update writes one row of the cache in place: no allocation, no copy of
// the whole cache (a memref<?x?x4x8xf32> to memref<?x?x4x8xf32> copy), only the update's rows.
// BUF-LABEL: func.func @main
// BUF-SAME: (%[[CACHE:[a-z0-9_]+]]: memref<?x?x4x8xf32>, %[[KV:[a-z0-9_]+]]: memref<?x1x4x8xf32>
// BUF-NOT: memref.alloc
// BUF-NOT: to memref<?x?x4x8xf32>
// BUF: %[[ROW:.*]] = memref.subview %[[CACHE]][%{{.*}}, %{{.*}}, 0, 0] [%{{.*}}, 1, 4, 8] [1, 1, 1, 1]
// BUF-NOT: memref.alloc
// BUF-NOT: to memref<?x?x4x8xf32>
// BUF: memref.subview %[[KV]]
// BUF: memref.subview %[[ROW]]
// BUF: memref.copy %{{.*}}, %{{.*}} : memref<1x1x1x8xf32, {{.*}}> to memref<1x1x1x8xf32, {{.*}}>
// BUF-NOT: memref.alloc
// BUF-NOT: to memref<?x?x4x8xf32>
// BUF: } else {
func.func @main(%cache: !relax.tensor<["b", "m", 4, 8], f32> {relax.donate = 0 : i64}, %kv: !relax.tensor<["b", 1, 4, 8], f32>, %pos: !relax.tensor<[], i32>) -> !relax.tensor<["b", "m", 4, 8], f32> {
  %z = "relax.constant"() {value = dense<0> : tensor<i32>} : () -> !relax.tensor<[], i32>
  %r = "relax.dynamic_update_slice"(%cache, %kv, %z, %pos, %z, %z) : (!relax.tensor<["b", "m", 4, 8], f32>, !relax.tensor<["b", 1, 4, 8], f32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>) -> !relax.tensor<["b", "m", 4, 8], f32>
  return %r : !relax.tensor<["b", "m", 4, 8], f32>
}

// -----

// The old cache is still read (exp) after the update: bufferization keeps a copy. The update
// goes into a fresh buffer holding a copy of the cache, exp reads the untouched cache, and the
// updated copy is written back into the cache at the end; the other result is materialized first.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[CACHE:[a-z0-9_]+]]: memref<?x?x4x8xf32>, %{{.*}}: memref<?x1x4x8xf32>, %{{.*}}: memref<i32>, %[[OUT0:[a-z0-9_]+]]: memref<?x?x4x8xf32>, %[[OUT1:[a-z0-9_]+]]: memref<?x?x4x8xf32>, %{{.*}}: memref<1xi32>)
// CHECK: %[[C:.*]] = bufferization.to_tensor %[[CACHE]] restrict writable
// CHECK: %[[R:.*]] = func.call @dynamic_update_slice(%[[C]],
// CHECK: %[[E:.*]] = func.call @exp(%[[C]],
// CHECK: bufferization.materialize_in_destination %[[E]] in restrict writable %[[OUT1]]
// CHECK-NEXT: bufferization.materialize_in_destination %[[R]] in writable %[[CACHE]]

// BUF-LABEL: func.func @main
// BUF-SAME: (%[[CACHE:[a-z0-9_]+]]: memref<?x?x4x8xf32>, %{{.*}}: memref<?x1x4x8xf32>, %{{.*}}: memref<i32>, %{{.*}}: memref<?x?x4x8xf32>, %[[OUT1:[a-z0-9_]+]]: memref<?x?x4x8xf32>,
// BUF: %[[COPY:.*]] = memref.alloc(%{{.*}}, %{{.*}}) {{.*}} : memref<?x?x4x8xf32>
// BUF-NEXT: memref.copy %[[CACHE]], %[[COPY]]
// BUF: func.call @__relax_kernel_exp(%[[CACHE]], %[[OUT1]])
// BUF-NEXT: memref.copy %[[COPY]], %[[CACHE]]
func.func @main(%cache: !relax.tensor<["b", "m", 4, 8], f32> {relax.donate = 0 : i64}, %kv: !relax.tensor<["b", 1, 4, 8], f32>, %pos: !relax.tensor<[], i32>) -> (!relax.tensor<["b", "m", 4, 8], f32>, !relax.tensor<["b", "m", 4, 8], f32>) {
  %z = "relax.constant"() {value = dense<0> : tensor<i32>} : () -> !relax.tensor<[], i32>
  %r = "relax.dynamic_update_slice"(%cache, %kv, %z, %pos, %z, %z) : (!relax.tensor<["b", "m", 4, 8], f32>, !relax.tensor<["b", 1, 4, 8], f32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>) -> !relax.tensor<["b", "m", 4, 8], f32>
  %e = "relax.exp"(%cache) : (!relax.tensor<["b", "m", 4, 8], f32>) -> !relax.tensor<["b", "m", 4, 8], f32>
  return %r, %e : !relax.tensor<["b", "m", 4, 8], f32>, !relax.tensor<["b", "m", 4, 8], f32>
}

// -----

// Two donated buffers swapped: each result may share storage with the OTHER donated argument, so
// both are copied out (alloc_tensor copy) before either donated buffer is written.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: memref<?x3xf32>, %[[Y:[a-z0-9_]+]]: memref<?x3xf32>,
// CHECK: %[[TX:.*]] = bufferization.to_tensor %[[X]] restrict writable
// CHECK: %[[TY:.*]] = bufferization.to_tensor %[[Y]] restrict writable
// CHECK: %[[CY:.*]] = bufferization.alloc_tensor() copy(%[[TY]])
// CHECK: %[[CX:.*]] = bufferization.alloc_tensor() copy(%[[TX]])
// CHECK: bufferization.materialize_in_destination %[[CY]] in writable %[[X]]
// CHECK: bufferization.materialize_in_destination %[[CX]] in writable %[[Y]]
func.func @main(%x: !relax.tensor<["n", 3], f32> {relax.donate = 0 : i64}, %y: !relax.tensor<["n", 3], f32> {relax.donate = 1 : i64}) -> (!relax.tensor<["n", 3], f32>, !relax.tensor<["n", 3], f32>) {
  return %y, %x : !relax.tensor<["n", 3], f32>, !relax.tensor<["n", 3], f32>
}
