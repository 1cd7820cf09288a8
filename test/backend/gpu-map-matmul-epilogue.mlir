// RUN: relax-opt %s --split-input-file --relax-infer-shapes --relax-legalize --relax-fuse-kernels --relax-lower-shapes --relax-to-upstream --relax-gpu-map | FileCheck %s
// RUN: relax-opt %s --split-input-file --relax-infer-shapes --relax-legalize --relax-fuse-kernels --relax-lower-shapes --relax-to-upstream --relax-spirv-map | FileCheck %s --check-prefix=SPIRV
// RUN: relax-opt %s --split-input-file --relax-infer-shapes --relax-legalize --relax-fuse-kernels --relax-plan-memory --relax-lower-shapes --relax-to-upstream --relax-gpu-map | FileCheck %s --check-prefix=PLAN

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

// -----

// The memory plan puts relu's result in the block of the matmul's input t (dead after the
// matmul). Fused, a block would write that block while other blocks still read rows of t: the
// epilogue stays its own kernel (exp, matmul, relu, matmul).
// PLAN-LABEL: func.func @shared_block
// PLAN: %[[T:.*]] = memref.view %[[B0:arg[0-9]+]][%c0][%{{.*}}] : memref<?xi8> to memref<?x32xf32>
// PLAN: gpu.launch_func
// PLAN: %[[C:.*]] = memref.view %{{.*}}[%c0][%{{.*}}] : memref<?xi8> to memref<?x32xf32>
// PLAN: gpu.launch_func {{.*}} args(%{{.*}} : index, %[[T]] : memref<?x32xf32>, %{{.*}} : memref<32x32xf32>, %[[C]] : memref<?x32xf32>)
// PLAN: gpu.launch_func {{.*}} args(%{{.*}} : index, %[[C]] : memref<?x32xf32>, %[[T]] : memref<?x32xf32>)
// PLAN: gpu.launch_func
// PLAN-NOT: gpu.launch_func
// PLAN: return
func.func @shared_block(%x: !relax.tensor<["n", 32], f32>, %w: !relax.tensor<[32, 32], f32>, %w2: !relax.tensor<[32, 32], f32>) -> !relax.tensor<["n", 32], f32> {
  %t = "relax.exp"(%x) : (!relax.tensor<["n", 32], f32>) -> !relax.tensor<["n", 32], f32>
  %m = "relax.matmul"(%t, %w) : (!relax.tensor<["n", 32], f32>, !relax.tensor<[32, 32], f32>) -> !relax.tensor<["n", 32], f32>
  %r = "relax.relu"(%m) : (!relax.tensor<["n", 32], f32>) -> !relax.tensor<["n", 32], f32>
  %o = "relax.matmul"(%r, %w2) : (!relax.tensor<["n", 32], f32>, !relax.tensor<[32, 32], f32>) -> !relax.tensor<["n", 32], f32>
  return %o : !relax.tensor<["n", 32], f32>
}
