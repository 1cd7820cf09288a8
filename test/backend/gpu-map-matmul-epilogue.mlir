// RUN: relax-opt %s --split-input-file --relax-infer-shapes --relax-legalize --relax-fuse-kernels --relax-lower-shapes --relax-to-upstream --relax-gpu-map | FileCheck %s
// RUN: relax-opt %s --split-input-file --relax-infer-shapes --relax-legalize --relax-fuse-kernels --relax-lower-shapes --relax-to-upstream --relax-spirv-map | FileCheck %s --check-prefix=SPIRV

// relu(x @ w + b): the zero fill, the shared-memory matmul and the bias + relu epilogue are one
// kernel. Each thread adds the bias to its sums and stores max(., 0) into the result; the
// matmul's own output, a temporary nothing else reads, is never written (nor allocated).
// CHECK-LABEL: func.func @linear_relu
// CHECK-SAME: (%[[X:.*]]: memref<?x64xf32>, %[[W:.*]]: memref<64x32xf32>, %[[B:.*]]: memref<32xf32>, %[[Y:.*]]: memref<?x32xf32>
// CHECK-NOT: memref.alloc
// CHECK: gpu.launch_func @{{.*}} threads in (%c16, %c16, %c1) args(%{{.*}} : index, %[[X]] : memref<?x64xf32>, %[[W]] : memref<64x32xf32>, %[[B]] : memref<32xf32>, %[[Y]] : memref<?x32xf32>)
// CHECK-NOT: gpu.launch_func
// CHECK: return
// CHECK: gpu.func @{{.*}}(%{{.*}}: index, %{{.*}}: memref<?x64xf32>, %{{.*}}: memref<64x32xf32>, %[[KB:.*]]: memref<32xf32>, %[[KY:.*]]: memref<?x32xf32>) workgroup
// CHECK: gpu.barrier
// CHECK: scf.if %{{[0-9]+}} {
// CHECK-NEXT: %[[BV:.*]] = memref.load %[[KB]][%[[COL:.*]]] : memref<32xf32>
// CHECK-NEXT: %[[S:.*]] = arith.addf %{{.*}}, %[[BV]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.maximumf %[[S]], %{{.*}} : f32
// CHECK-NEXT: memref.store %[[R]], %[[KY]][%{{.*}}, %[[COL]]] : memref<?x32xf32>
// CHECK-NEXT: }
// SPIRV-LABEL: func.func @linear_relu
// SPIRV-COUNT-1: gpu.launch_func
// SPIRV-NOT: gpu.launch_func
// SPIRV: return
func.func @linear_relu(%x: !relax.tensor<["n", 64], f32>, %w: !relax.tensor<[64, 32], f32>, %b: !relax.tensor<[32], f32>) -> !relax.tensor<["n", 32], f32> {
  %m = "relax.matmul"(%x, %w) : (!relax.tensor<["n", 64], f32>, !relax.tensor<[64, 32], f32>) -> !relax.tensor<["n", 32], f32>
  %a = "relax.add"(%m, %b) : (!relax.tensor<["n", 32], f32>, !relax.tensor<[32], f32>) -> !relax.tensor<["n", 32], f32>
  %r = "relax.relu"(%a) : (!relax.tensor<["n", 32], f32>) -> !relax.tensor<["n", 32], f32>
  return %r : !relax.tensor<["n", 32], f32>
}

// -----

// The product is also returned: the fused kernel writes both it and the epilogue's result.
// CHECK-LABEL: func.func @both
// CHECK-SAME: (%{{.*}}: memref<?x64xf32>, %{{.*}}: memref<64x32xf32>, %[[P:.*]]: memref<?x32xf32>, %[[E:.*]]: memref<?x32xf32>
// CHECK: gpu.launch_func {{.*}} args({{.*}}%[[P]] : memref<?x32xf32>, %[[E]] : memref<?x32xf32>)
// CHECK-NOT: gpu.launch_func
// CHECK: return
// CHECK: gpu.func
// CHECK: gpu.barrier
// CHECK: scf.if %{{[0-9]+}} {
// CHECK-NEXT: memref.store %[[V:[0-9#]+]], %{{.*}}[%{{.*}}, %{{.*}}] : memref<?x32xf32>
// CHECK-NEXT: math.exp %[[V]] : f32
// CHECK-NEXT: memref.store
func.func @both(%x: !relax.tensor<["n", 64], f32>, %w: !relax.tensor<[64, 32], f32>) -> (!relax.tensor<["n", 32], f32>, !relax.tensor<["n", 32], f32>) {
  %m = "relax.matmul"(%x, %w) : (!relax.tensor<["n", 64], f32>, !relax.tensor<[64, 32], f32>) -> !relax.tensor<["n", 32], f32>
  %e = "relax.exp"(%m) : (!relax.tensor<["n", 32], f32>) -> !relax.tensor<["n", 32], f32>
  return %m, %e : !relax.tensor<["n", 32], f32>, !relax.tensor<["n", 32], f32>
}
