// RUN: relax-opt %s --relax-legalize --relax-to-upstream | FileCheck %s

// The entry takes caller-owned memrefs and an error slot; checks guard the body.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: memref<?x8xf32>, %[[OUT:.*]]: memref<?x8xf32>, %[[ERR:.*]]: memref<1xi32>)
// CHECK-SAME: llvm.emit_c_interface
// CHECK: %[[T:.*]] = bufferization.to_tensor %[[X]] restrict
// CHECK: %[[D:.*]] = tensor.dim %[[T]], %{{.*}}
// CHECK: scf.if %[[OK:.*]] {
// A returned call_tir result gets the caller's buffer as its destination (the kernel writes it
// in place); the materialization at the return is then a self-copy that bufferization folds.
// CHECK:   %[[E:.*]] = bufferization.to_tensor %[[OUT]] restrict writable : memref<?x8xf32> to tensor<?x8xf32>
// CHECK:   %[[R:.*]] = func.call @exp(%[[T]], %[[E]])
// CHECK:   bufferization.materialize_in_destination %[[R]] in restrict writable %[[OUT]]
// CHECK: } else {
// CHECK:   memref.store %{{.*}}, %[[ERR]]
// CHECK-NOT: "relax
func.func @main(%x: !relax.tensor<["n", 8], f32>) -> !relax.tensor<["n", 8], f32> {
  %e = "relax.exp"(%x) : (!relax.tensor<["n", 8], f32>) -> !relax.tensor<["n", 8], f32>
  return %e : !relax.tensor<["n", 8], f32>
}
