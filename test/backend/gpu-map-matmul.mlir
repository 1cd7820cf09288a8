// RUN: relax-opt %s --relax-legalize --relax-to-upstream --relax-gpu-map | FileCheck %s
// RUN: relax-opt %s --relax-legalize --relax-to-upstream --relax-gpu-map="matmul_tile=16" | FileCheck %s --check-prefix=T16
// RUN: relax-opt %s --relax-legalize --relax-to-upstream --relax-gpu-map="matmul_tile=0" | FileCheck %s --check-prefix=OFF

// A dynamic [m, k] x [k, n] matmul: a 16 x 16 block per 64 x 64 output tile (each thread 4 x 4
// outputs), the grid (ceildiv(n, 64), ceildiv(m, 64)) computed on the host from the dims; K in
// steps of 16 through an A tile [64, 16] and a B tile [16, 64] in workgroup memory. C's zero fill
// is fused: the sums start at 0 and C is written once, never read (one launch).
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[A:.*]]: memref<?x?xf32>, %[[B:.*]]: memref<?x?xf32>, %[[C:.*]]: memref<?x?xf32>, %{{.*}}: memref<1xi32>)
// CHECK: %[[K:.*]] = memref.dim %[[A]], %c1
// CHECK-NOT: gpu.launch_func
// CHECK: %[[M:.*]] = memref.dim %[[A]], %c0
// CHECK: %[[N:.*]] = memref.dim %[[B]], %c1
// CHECK: %[[N1:.*]] = arith.addi %[[N]], %c63
// CHECK: %[[GX:.*]] = arith.divui %[[N1]], %c64
// CHECK: %[[M1:.*]] = arith.addi %[[M]], %c63
// CHECK: %[[GY:.*]] = arith.divui %[[M1]], %c64
// CHECK: gpu.launch_func @[[MK:main_kernel]]::@main_kernel blocks in (%[[GX]], %[[GY]], %c1) threads in (%c16, %c16, %c1) args(%[[M]] : index, %[[N]] : index, %[[K]] : index, %[[A]] : memref<?x?xf32>, %[[B]] : memref<?x?xf32>, %[[C]] : memref<?x?xf32>)
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.module @[[MK]]
// CHECK: gpu.func @main_kernel({{.*}}) workgroup(%[[SA:.*]] : memref<1024xf32, #gpu.address_space<workgroup>>, %[[SB:.*]] : memref<1024xf32, #gpu.address_space<workgroup>>) kernel attributes {known_block_size = array<i32: 16, 16, 1>}
// CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c16 iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)
// CHECK-COUNT-4: memref.store %{{.*}}, %[[SA]]
// CHECK-COUNT-4: memref.store %{{.*}}, %[[SB]]
// CHECK-NEXT: gpu.barrier
// CHECK: arith.mulf
// CHECK: gpu.barrier
// CHECK-NEXT: scf.yield
// CHECK-NOT: memref.load %{{.*}} : memref<?x?xf32>{{$}}
// CHECK-COUNT-16: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<?x?xf32>
// CHECK: gpu.return

// A 16 x 16 tile, one output per thread: loads guarded by row < m, k < K and k < K, col < n.
// T16: gpu.launch_func @main_kernel::@main_kernel blocks in (%{{.*}}, %{{.*}}, %c1) threads in (%c16, %c16, %c1)
// T16: gpu.func @main_kernel(%[[KM:.*]]: index, %[[KN:.*]]: index, %[[KK:.*]]: index, %[[KA:.*]]: memref<?x?xf32>, %[[KB:.*]]: memref<?x?xf32>, %[[KC:.*]]: memref<?x?xf32>) workgroup(%[[SA:.*]] : memref<256xf32, #gpu.address_space<workgroup>>, %[[SB:.*]] : memref<256xf32, #gpu.address_space<workgroup>>)
// T16-DAG: %[[BX:.*]] = gpu.block_id x
// T16-DAG: %[[BY:.*]] = gpu.block_id y
// T16-DAG: %[[TX:.*]] = gpu.thread_id x
// T16-DAG: %[[TY:.*]] = gpu.thread_id y
// T16: %[[ROW:.*]] = arith.addi %{{.*}}, %[[TY]]
// T16: %[[COL:.*]] = arith.addi %{{.*}}, %[[TX]]
// T16: %[[ROWOK:.*]] = arith.cmpi ult, %[[ROW]], %[[KM]]
// T16: %[[COLOK:.*]] = arith.cmpi ult, %[[COL]], %[[KN]]
// T16: %[[NONEMPTY:.*]] = arith.cmpi ugt, %[[KK]], %c0
// T16: %[[SUM:.*]] = scf.if %[[NONEMPTY]] -> (f32)
// T16: scf.for %[[K0:.*]] = %c0 to %[[KK]] step %c16 iter_args(%[[ACC:.*]] = %cst) -> (f32)
// T16: %[[KA0:.*]] = arith.addi %[[K0]], %[[TX]]
// T16: %[[KB0:.*]] = arith.addi %[[K0]], %[[TY]]
// T16: %[[KAOK:.*]] = arith.cmpi ult, %[[KA0]], %[[KK]]
// T16: %[[AOK:.*]] = arith.andi %[[ROWOK]], %[[KAOK]]
// T16: scf.if %[[AOK]] -> (f32)
// T16: memref.load %[[KA]][%[[ROW]], %[[KA0]]]
// T16: memref.store %{{.*}}, %[[SA]]
// T16: memref.load %[[KB]][%[[KB0]], %[[COL]]]
// T16: memref.store %{{.*}}, %[[SB]]
// T16-NEXT: gpu.barrier
// T16-COUNT-16: arith.mulf
// T16: gpu.barrier
// T16: %[[OK:.*]] = arith.andi %[[ROWOK]], %[[COLOK]]
// T16: scf.if %[[OK]]
// T16-NOT: memref.load %[[KC]]
// T16: memref.store %[[SUM]], %[[KC]][%[[ROW]], %[[COL]]]

// matmul_tile=0: the generic mapping (one thread per output, K sequential), no workgroup memory.
// OFF-NOT: workgroup(
// OFF-NOT: gpu.barrier
func.func @main(%a: !relax.tensor<["m", "k"], f32>, %b: !relax.tensor<["k", "n"], f32>) -> !relax.tensor<["m", "n"], f32> {
  %c = "relax.matmul"(%a, %b) : (!relax.tensor<["m", "k"], f32>, !relax.tensor<["k", "n"], f32>) -> !relax.tensor<["m", "n"], f32>
  return %c : !relax.tensor<["m", "n"], f32>
}
