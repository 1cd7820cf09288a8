// RUN: relax-opt %s --relax-legalize --relax-plan-memory | FileCheck %s
// RUN: relax-opt %s --relax-legalize --relax-plan-memory --relax-to-upstream | FileCheck %s --check-prefix=LOWERED
// RUN: relax-opt %s --relax-legalize --relax-plan-memory --relax-to-upstream --relax-cpu-vectorize --relax-cpu-calls --relax-cpu-bufferize | FileCheck %s --check-prefix=BUF

// Four intermediates of 4*256*n bytes (n <= 1024), at most two live at once: two blocks of
// 1 MiB, reused alternately; the returned tensor goes to the caller's buffer (unplanned).
// CHECK-LABEL: func.func @main
// CHECK-SAME: relax.memory_plan = {blocks = [1048576, 1048576], live_peak_bytes = 2097152 : i64, planned_peak_bytes = 2097152 : i64, unplanned_bytes = 4194304 : i64}
// CHECK: %[[A:.*]] = "relax_v.call_tir"(%arg0, %arg1) {callee = @matmul, relax.storage = [0]}
// CHECK: %[[B:.*]] = "relax_v.call_tir"(%[[A]]) {callee = @relu, relax.storage = [1]}
// CHECK: %[[C:.*]] = "relax_v.call_tir"(%[[B]], %arg1) {callee = @matmul, relax.storage = [0]}
// CHECK: %[[D:.*]] = "relax_v.call_tir"(%[[C]]) {callee = @tanh, relax.storage = [1]}
// CHECK: "relax_v.call_tir"(%[[D]], %arg1) {callee = @matmul}

// The blocks are workspace arguments (runtime-owned, reused across calls), sized in
// relax.workspace at the bound.
// LOWERED-LABEL: func.func @main
// LOWERED-SAME: %[[OUT:[a-z0-9]+]]: memref<?x256xf32>, %[[W0:[a-z0-9]+]]: memref<?xi8>, %[[W1:[a-z0-9]+]]: memref<?xi8>, %{{.*}}: memref<1xi32>
// LOWERED-SAME: "symbol n exceeds its upper bound 1024 (relax.symbol_bounds)"
// LOWERED-SAME: relax.workspace = [1048576, 1048576]
// LOWERED: %[[V:.*]] = memref.view %[[W0]][%{{.*}}][%{{.*}}] : memref<?xi8> to memref<?x256xf32>
// LOWERED: %[[P:.*]] = bufferization.to_tensor %[[V]] restrict writable {relax.placed = 1 : index}
// LOWERED: func.call @matmul(%{{.*}}, %{{.*}}, %[[P]])
// LOWERED: memref.view %[[W1]]
// LOWERED: bufferization.to_tensor %{{.*}} restrict writable {relax.placed = 2 : index}
// LOWERED: memref.view %[[W0]]
// LOWERED: memref.view %[[W1]]
// LOWERED: bufferization.to_tensor %[[OUT]] restrict writable

// After bufferization every kernel writes its block (or the caller's buffer) in place: no
// function-level allocation and no copy is left.
// BUF-LABEL: func.func @main
// BUF-NOT: memref.alloc(%
// BUF-NOT: memref.alloc() {alignment = 64 : i64} : memref<{{[0-9]+}}xi8>
// BUF-NOT: memref.copy
// BUF: return
func.func @main(%x: !relax.tensor<["n", 256], f32>, %w: !relax.tensor<[256, 256], f32>) -> !relax.tensor<["n", 256], f32> attributes {relax.symbol_bounds = {n = 1024}} {
  %0 = "relax.matmul"(%x, %w) : (!relax.tensor<["n", 256], f32>, !relax.tensor<[256, 256], f32>) -> !relax.tensor<["n", 256], f32>
  %1 = "relax.relu"(%0) : (!relax.tensor<["n", 256], f32>) -> !relax.tensor<["n", 256], f32>
  %2 = "relax.matmul"(%1, %w) : (!relax.tensor<["n", 256], f32>, !relax.tensor<[256, 256], f32>) -> !relax.tensor<["n", 256], f32>
  %3 = "relax.tanh"(%2) : (!relax.tensor<["n", 256], f32>) -> !relax.tensor<["n", 256], f32>
  %4 = "relax.matmul"(%3, %w) : (!relax.tensor<["n", 256], f32>, !relax.tensor<[256, 256], f32>) -> !relax.tensor<["n", 256], f32>
  return %4 : !relax.tensor<["n", 256], f32>
}
