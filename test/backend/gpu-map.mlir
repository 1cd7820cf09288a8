// RUN: relax-opt %s --relax-legalize --relax-to-upstream --relax-gpu-map | FileCheck %s
// RUN: relax-opt %s --relax-legalize --relax-to-upstream --relax-gpu-map="block=64,4" | FileCheck %s --check-prefix=BLOCK

// Elementwise with broadcast, then relu (not fused here: two 2-D kernels), block (32, 8) with x along the contiguous dim; the
// grid is ceildiv(n, 8) computed on the host from the dynamic dim.
// CHECK: #[[GRID:.*]] = affine_map<()[s0] -> (s0 ceildiv 8)>
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: memref<?x64xf32>, %[[B:.*]]: memref<64xf32>, %[[OUT:.*]]: memref<?x64xf32>, %{{.*}}: memref<1xi32>)
// CHECK: %[[N:.*]] = memref.dim %[[X]], %{{.*}} : memref<?x64xf32>
// CHECK: %[[T:.*]] = memref.alloc(%[[N]])
// CHECK: %[[G:.*]] = affine.apply #[[GRID]]()[%[[N]]]
// CHECK: gpu.launch_func @[[K:main_kernel]]::@main_kernel blocks in (%c2, %[[G]], %c1) threads in (%c32, %c8, %c1) args(%[[N]] : index, %[[X]] : memref<?x64xf32>, %[[B]] : memref<64xf32>, %[[T]] : memref<?x64xf32>)
// CHECK: gpu.launch_func @[[K2:main_kernel_0]]::@main_kernel blocks in (%c2, %[[G]], %c1) threads in (%c32, %c8, %c1) args(%[[N]] : index, %[[T]] : memref<?x64xf32>, %[[OUT]] : memref<?x64xf32>)
// CHECK: memref.dealloc %[[T]]
// CHECK-NOT: linalg.
// CHECK: gpu.module @[[K]]
// CHECK: gpu.func @main_kernel(%[[KN:.*]]: index, %{{.*}}: memref<?x64xf32>, %{{.*}}: memref<64xf32>, %{{.*}}: memref<?x64xf32>) kernel
// CHECK-DAG: gpu.block_id x
// CHECK-DAG: gpu.block_id y
// CHECK-DAG: gpu.thread_id x
// CHECK-DAG: gpu.thread_id y
// CHECK: arith.cmpi ult, %{{.*}}, %[[KN]]
// CHECK: scf.if
// CHECK: arith.addf
// CHECK: memref.store
// CHECK: gpu.return
// CHECK: gpu.module @[[K2]]
// CHECK: arith.maximumf
// CHECK: gpu.return

// BLOCK: gpu.launch_func @main_kernel::@main_kernel blocks in (%c1, %{{.*}}, %c1) threads in (%c64, %c4, %c1)
func.func @main(%x: !relax.tensor<["n", 64], f32>, %b: !relax.tensor<[64], f32>) -> !relax.tensor<["?", "?"], f32> {
  %s = "relax.add"(%x, %b) : (!relax.tensor<["n", 64], f32>, !relax.tensor<[64], f32>) -> !relax.tensor<["?", "?"], f32>
  %r = "relax.relu"(%s) : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  return %r : !relax.tensor<["?", "?"], f32>
}
