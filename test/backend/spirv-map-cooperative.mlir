// RUN: relax-opt %s --relax-legalize --relax-to-upstream --relax-spirv-map | FileCheck %s
// RUN: relax-opt %s --relax-legalize --relax-to-upstream --relax-to-spirv | FileCheck %s --check-prefix=SPV

// A matmul, then a max over each row of its result, for Vulkan: two kernels, the inits fused.
// The matmul: a 16 x 16 workgroup per 64 x 64 tile, the grid (ceildiv(n, 64), ceildiv(m, 64)) from the dims on the host; the row
// max: 32 invocations per row, 8 rows per workgroup, grid min(ceildiv(m, 8), 65535). Workgroup
// memory is a memref.alloc in the Workgroup storage class inside the kernel; buffers reach the
// kernels flattened to 1-D, as for every SPIR-V kernel.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[A:.*]]: memref<?x?xf32>, %[[B:.*]]: memref<?x?xf32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<1xi32>)
// CHECK-DAG: %[[M:.*]] = memref.dim %[[A]], %c0
// CHECK-DAG: %[[N:.*]] = memref.dim %[[B]], %c1
// CHECK: %[[N1:.*]] = arith.addi %[[N]], %c63 : index
// CHECK: %[[GX:.*]] = arith.divui %[[N1]], %c64 : index
// CHECK: %[[M1:.*]] = arith.addi %[[M]], %c63 : index
// CHECK: %[[GY:.*]] = arith.divui %[[M1]], %c64 : index
// CHECK: gpu.launch_func @[[MK:main_kernel]]::@main_kernel blocks in (%[[GX]], %[[GY]], %c1) threads in (%c16, %c16, %c1)
// CHECK: %[[M7:.*]] = arith.addi %[[M]], %c7 : index
// CHECK: %[[R:.*]] = arith.divui %[[M7]], %c8 : index
// CHECK: %[[G:.*]] = arith.minui %[[R]], %c65535 : index
// CHECK: gpu.launch_func @[[RK:main_kernel_0]]::@main_kernel blocks in (%[[G]], %c1, %c1) threads in (%c32, %c8, %c1)
// CHECK: gpu.module @[[MK]]
// CHECK: gpu.func @main_kernel({{.*}}) kernel attributes {known_block_size = array<i32: 16, 16, 1>, spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [16, 16, 1]>}
// CHECK: %[[SA:.*]] = memref.alloc() : memref<1024xf32, #spirv.storage_class<Workgroup>>
// CHECK: %[[SB:.*]] = memref.alloc() : memref<1024xf32, #spirv.storage_class<Workgroup>>
// CHECK: memref.store %{{.*}}, %[[SA]]
// CHECK: memref.store %{{.*}}, %[[SB]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[SA]]
// CHECK: memref.load %[[SB]]
// CHECK: gpu.barrier
// CHECK: gpu.module @[[RK]]
// CHECK: gpu.func @main_kernel({{.*}}) kernel attributes {known_block_size = array<i32: 32, 8, 1>, spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [32, 8, 1]>}
// CHECK: %[[SM:.*]] = memref.alloc() : memref<256xf32, #spirv.storage_class<Workgroup>>
// CHECK: memref.store %{{.*}}, %[[SM]]
// CHECK-NEXT: gpu.barrier
// CHECK-COUNT-5: gpu.barrier

// SPV: spirv.module @__spv__main_kernel{{ }}
// SPV-DAG: spirv.GlobalVariable @[[WA:__workgroup_mem__[0-9]+]] : !spirv.ptr<!spirv.struct<(!spirv.array<1024 x f32>)>, Workgroup>
// SPV-DAG: spirv.GlobalVariable @[[WB:__workgroup_mem__[0-9]+]] : !spirv.ptr<!spirv.struct<(!spirv.array<1024 x f32>)>, Workgroup>
// SPV: spirv.ControlBarrier <Workgroup>, <Workgroup>, <AcquireRelease|WorkgroupMemory>
// SPV: spirv.ControlBarrier <Workgroup>, <Workgroup>, <AcquireRelease|WorkgroupMemory>
// SPV: spirv.ExecutionMode @main_kernel "LocalSize", 16, 16, 1
// SPV: spirv.module @__spv__main_kernel_0
// SPV: spirv.GlobalVariable @{{.*}} : !spirv.ptr<!spirv.struct<(!spirv.array<256 x f32>)>, Workgroup>
// SPV: spirv.ControlBarrier <Workgroup>, <Workgroup>, <AcquireRelease|WorkgroupMemory>
// SPV: spirv.ExecutionMode @main_kernel "LocalSize", 32, 8, 1
func.func @main(%a: !relax.tensor<["m", "k"], f32>, %b: !relax.tensor<["k", "n"], f32>) -> !relax.tensor<["m"], f32> {
  %c = "relax.matmul"(%a, %b) : (!relax.tensor<["m", "k"], f32>, !relax.tensor<["k", "n"], f32>) -> !relax.tensor<["m", "n"], f32>
  %s = "relax.max"(%c) {axes = [1], keepdims = false} : (!relax.tensor<["m", "n"], f32>) -> !relax.tensor<["m"], f32>
  return %s : !relax.tensor<["m"], f32>
}
