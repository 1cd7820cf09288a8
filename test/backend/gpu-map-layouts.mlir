// RUN: relax-opt %s --split-input-file --relax-infer-shapes --relax-legalize --relax-to-upstream --relax-gpu-map | FileCheck %s
// RUN: relax-opt %s --split-input-file --relax-infer-shapes --relax-legalize --relax-to-upstream --relax-spirv-map | FileCheck %s --check-prefix=SPIRV
// RUN: relax-opt %s --split-input-file --relax-infer-shapes --relax-legalize --relax-to-upstream --relax-gpu-map --relax-gpu-to-ptx | FileCheck %s --check-prefix=PTX

// Layouts that a parallel-loop mapping alone would leave on the host.

// A column reduction (over the leading dim): one cooperative kernel, its init fused. 32 x 8
// threads per 32 columns: thread (tx, ty) folds rows ty, ty + 8, ... of column tx (neighbouring
// threads read neighbouring elements), then a tree over ty in workgroup memory -- not a host
// loop of one launch per row, and not one thread per column walking the whole column.
// CHECK-LABEL: func.func @column_max
// CHECK: %[[B:.*]] = memref.dim %arg0, %c0
// CHECK: gpu.launch_func @[[RED:.*]]::@{{.*}} blocks in (%c1, %c1, %c1) threads in (%c32, %c8, %c1) args(%[[B]] : index, %arg0 : memref<?x8xf32>, %arg1 : memref<8xf32>)
// CHECK-NOT: gpu.launch_func
// CHECK: return
// CHECK: gpu.module @[[RED]]
// CHECK: gpu.func {{.*}}(%[[KB:.*]]: index, %[[X:.*]]: memref<?x8xf32>, %[[O:.*]]: memref<8xf32>) workgroup(%[[SM:.*]] : memref<256xf32, #gpu.address_space<workgroup>>)
// CHECK-DAG: %[[TX:.*]] = gpu.thread_id x
// CHECK-DAG: %[[TY:.*]] = gpu.thread_id y
// CHECK: %[[COL:.*]] = arith.addi %arg{{[0-9]+}}, %[[TX]] : index
// CHECK: scf.for %[[I:.*]] = %[[TY]] to %[[KB]] step %c8 iter_args
// CHECK: memref.load %[[X]][%[[I]], %[[COL]]]
// CHECK: arith.maximumf
// CHECK: memref.store %{{.*}}, %[[SM]]
// CHECK-COUNT-3: gpu.barrier
// CHECK: memref.store %{{.*}}, %[[O]][%[[COL]]]
// SPIRV-LABEL: func.func @column_max
// SPIRV-COUNT-1: gpu.launch_func
// SPIRV-NOT: gpu.launch_func
// SPIRV: return
func.func @column_max(%x: !relax.tensor<["b", 8], f32>) -> !relax.tensor<[8], f32> {
  %s = "relax.max"(%x) {axes = [0], keepdims = false} : (!relax.tensor<["b", 8], f32>) -> !relax.tensor<[8], f32>
  return %s : !relax.tensor<[8], f32>
}

// -----

// Scalar work: a rank-0 elementwise op runs as a one-thread kernel, not as host code loading
// and storing device memory; a sum to a scalar is one cooperative kernel with its init fused.
// CHECK-LABEL: func.func @scalars
// CHECK-NOT: memref.store
// CHECK-NOT: memref.load
// CHECK: gpu.launch_func @[[E:.*]]::@{{.*}} blocks in (%c1, %c1, %c1)
// CHECK-NOT: memref.store
// CHECK-NOT: memref.load
// CHECK: gpu.launch_func @[[S:.*]]::@{{.*}} blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1)
// CHECK-NOT: memref.store
// CHECK: return
// CHECK: gpu.module @[[E]]
// CHECK: math.exp
// CHECK: memref.store %{{.*}}, %{{.*}}[] : memref<f32>
// CHECK: gpu.module @[[S]]
// CHECK: gpu.barrier
// SPIRV-LABEL: func.func @scalars
// SPIRV-NOT: memref.store
// SPIRV-NOT: memref.load
// SPIRV: return
func.func @scalars(%x: !relax.tensor<[], f32>, %y: !relax.tensor<["n"], f32>) -> (!relax.tensor<[], f32>, !relax.tensor<[], f32>) {
  %e = "relax.exp"(%x) : (!relax.tensor<[], f32>) -> !relax.tensor<[], f32>
  %s = "relax.sum"(%y) {axes = [0], keepdims = false} : (!relax.tensor<["n"], f32>) -> !relax.tensor<[], f32>
  return %e, %s : !relax.tensor<[], f32>, !relax.tensor<[], f32>
}

// -----

// A concat: each piece is a kernel over the whole output buffer with its offset added to the
// index; no strided view reaches a kernel or the host.
// CHECK-LABEL: func.func @concat
// CHECK-NOT: memref.subview
// CHECK: %[[B:.*]] = memref.dim %arg0, %c0
// CHECK: gpu.launch_func {{.*}} args({{.*}}%arg2 : memref<?x8xf32>
// CHECK: gpu.launch_func {{.*}} args({{.*}}%[[B]] : index{{.*}}%arg2 : memref<?x8xf32>
// CHECK: return
// CHECK: gpu.func
// CHECK: gpu.func {{.*}}(%{{.*}}: memref<?x8xf32>, %[[OFF:.*]]: index, %[[OUT:.*]]: memref<?x8xf32>
// CHECK: %[[ROW:.*]] = arith.addi %{{.*}}, %[[OFF]] : index
// CHECK: memref.store %{{.*}}, %[[OUT]][%[[ROW]], %{{.*}}] : memref<?x8xf32>
// SPIRV-LABEL: func.func @concat
// SPIRV-NOT: memref.subview
// SPIRV: return
func.func @concat(%x: !relax.tensor<["b", 8], f32>, %y: !relax.tensor<["s", 8], f32>) -> !relax.tensor<["b + s", 8], f32> {
  %c = "relax_v.concat"(%x, %y) {axis = 0} : (!relax.tensor<["b", 8], f32>, !relax.tensor<["s", 8], f32>) -> !relax.tensor<["b + s", 8], f32>
  return %c : !relax.tensor<["b + s", 8], f32>
}

// -----

// A boolean result: memref<i1> holds a byte per element, so the kernel stores a byte (NVVM's
// memref lowering would abort the process on an i1 store).
// PTX: .entry mask_kernel
// PTX-SAME: setp.gt.f32
// PTX-SAME: selp.b16 {{[^%]*}}%[[BYTE:rs[0-9]+]], 1, 0
// PTX-SAME: st.b8 {{[^[]*}}[%rd{{[0-9]+}}], %[[BYTE]];
func.func @mask(%x: !relax.tensor<["n"], f32>, %y: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], i1> {
  %m = "relax.greater"(%x, %y) : (!relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], i1>
  return %m : !relax.tensor<["n"], i1>
}
