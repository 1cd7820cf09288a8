// RUN: relax-opt %s --relax-legalize --relax-to-upstream --relax-gpu-map | FileCheck %s
// RUN: relax-opt %s --relax-legalize --relax-to-upstream --relax-gpu-map="reduce_threads=32" | FileCheck %s --check-prefix=WARP
// RUN: relax-opt %s --relax-legalize --relax-to-upstream --relax-gpu-map="reduce_threads=0" | FileCheck %s --check-prefix=OFF

// A row reduction over a dynamic [n, k], its zero init fused (one kernel): one
// block of 256 threads per row, the grid min(n, 65535) computed on the host from n; the block
// loops over rows, each thread strides over k, then a tree in workgroup memory, one barrier
// per step, and thread 0 stores the init value plus the row's total into the output.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: memref<?x?xf32>, %[[OUT:.*]]: memref<?xf32>, %{{.*}}: memref<1xi32>)
// CHECK-DAG: %[[MAXG:.*]] = arith.constant 65535 : index
// CHECK-DAG: %[[C256:.*]] = arith.constant 256 : index
// CHECK-NOT: gpu.launch_func
// CHECK: %[[N:.*]] = memref.dim %[[X]], %c0
// CHECK: %[[K:.*]] = memref.dim %[[X]], %c1
// CHECK: %[[G:.*]] = arith.minui %[[N]], %[[MAXG]] : index
// CHECK: gpu.launch_func @[[RK:main_kernel]]::@main_kernel blocks in (%[[G]], %c1, %c1) threads in (%[[C256]], %c1, %c1) args(%[[N]] : index, %[[K]] : index, %[[X]] : memref<?x?xf32>, %[[OUT]] : memref<?xf32>)
// CHECK: gpu.module @[[RK]]
// CHECK: gpu.func @main_kernel(%[[KN:.*]]: index, %[[KK:.*]]: index, %[[KX:.*]]: memref<?x?xf32>, %[[KO:.*]]: memref<?xf32>) workgroup(%[[SM:.*]] : memref<256xf32, #gpu.address_space<workgroup>>) kernel attributes {known_block_size = array<i32: 256, 1, 1>}
// CHECK-DAG: %[[BID:.*]] = gpu.block_id x
// CHECK-DAG: %[[TID:.*]] = gpu.thread_id x
// CHECK-DAG: %[[GDIM:.*]] = gpu.grid_dim x
// CHECK: scf.for %[[ROW:.*]] = %[[BID]] to %[[KN]] step %[[GDIM]] {
// CHECK: scf.for %[[J:.*]] = %[[TID]] to %[[KK]] step %c256 iter_args(%[[ACC:.*]] = %cst) -> (f32) {
// CHECK: %[[V:.*]] = memref.load %[[KX]][%[[ROW]], %[[J]]]
// CHECK: arith.addf %[[V]], %[[ACC]] : f32
// CHECK: memref.store %{{.*}}, %[[SM]][%[[TID]]] : memref<256xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: gpu.barrier
// CHECK: arith.cmpi ult, %[[TID]], %c128
// CHECK: arith.addi %[[TID]], %c128
// CHECK: gpu.barrier
// CHECK-COUNT-7: gpu.barrier
// CHECK-NOT: gpu.barrier
// CHECK: %[[TOTAL:.*]] = memref.load %[[SM]][%c0]
// CHECK-NOT: memref.load %[[KO]]
// CHECK: %[[NEW:.*]] = arith.addf %[[TOTAL]], %cst{{.*}} : f32
// CHECK: memref.store %[[NEW]], %[[KO]][%[[ROW]]]
// CHECK: gpu.return

// 32 threads per row, 8 rows per block: grid min(ceildiv(n, 8), 65535).
// WARP: %[[N:.*]] = memref.dim %arg0, %c0
// WARP: %[[A:.*]] = arith.addi %[[N]], %c7 : index
// WARP: %[[D:.*]] = arith.divui %[[A]], %c8 : index
// WARP: %[[G:.*]] = arith.minui %[[D]], %c65535 : index
// WARP: gpu.launch_func @main_kernel::@main_kernel blocks in (%[[G]], %c1, %c1) threads in (%c32, %c8, %c1)
// WARP: workgroup(%{{.*}} : memref<256xf32, #gpu.address_space<workgroup>>)
// WARP: gpu.thread_id y
// WARP-COUNT-6: gpu.barrier
// WARP-NOT: gpu.barrier

// reduce_threads=0: the generic mapping, one thread per row and no workgroup memory.
// OFF-NOT: workgroup(
// OFF-NOT: gpu.barrier
// OFF: gpu.launch_func @main_kernel_0::@main_kernel
// OFF-NOT: workgroup(
// OFF-NOT: gpu.barrier
func.func @main(%x: !relax.tensor<["n", "k"], f32>) -> !relax.tensor<["n"], f32> {
  %s = "relax.sum"(%x) {axes = [1], keepdims = false} : (!relax.tensor<["n", "k"], f32>) -> !relax.tensor<["n"], f32>
  return %s : !relax.tensor<["n"], f32>
}
