// RUN: relax-opt %s --relax-legalize --relax-to-upstream --relax-spirv-map | FileCheck %s

// llvmpipe (lavapipe) stops every loop of a shader invocation after 65535 iterations in all.
// A one-thread kernel (an argmax to a scalar runs as one invocation's loop over all n elements)
// is split into host-level chunks of at most 60000 iterations, one launch each, in order.
// CHECK-LABEL: func.func @argmax
// CHECK: %[[N:.*]] = memref.dim %{{.*}}, %c0
// CHECK: scf.for %[[C:.*]] = %c0 to %[[N]] step %c60000 {
// CHECK:   %[[E:.*]] = arith.addi %[[C]], %c60000
// CHECK:   %[[HI:.*]] = arith.minsi %[[E]], %[[N]]
// CHECK:   gpu.launch_func @{{.*}}args(%{{.*}}, %[[C]] : index, %[[HI]] : index)
// Every launch of a kernel with loops carries the formula of one invocation's iterations (its
// loop from argument 3 to argument 4, step 1; the launch is refused on llvmpipe over the limit).
// CHECK-SAME: relax.loop_cost = "[\22sum\22,[\22max\22,[\22sum\22,[\22loop\22,[\22p\22,3],[\22p\22,4],[\22c\22,1],0,[\22sum\22]]]]]"
func.func @argmax(%x: !relax.tensor<["n"], f32>) -> !relax.tensor<[], i32> {
  %a = "relax.argmax"(%x) {axis = 0 : i64, dtype = i32} : (!relax.tensor<["n"], f32>) -> !relax.tensor<[], i32>
  return %a : !relax.tensor<[], i32>
}

// A row reduction strides each row over 32 invocations: ceil((k - tid) / 32) iterations each.
// CHECK-LABEL: func.func @rows
// CHECK: gpu.launch_func {{.*}}relax.loop_cost = {{.*}}[\22loop\22,[\22tid\22,0],[\22p\22,1],[\22c\22,32]
func.func @rows(%x: !relax.tensor<["n", "k"], f32>) -> !relax.tensor<["n"], f32> {
  %s = "relax.sum"(%x) {axes = [1], keepdims = false} : (!relax.tensor<["n", "k"], f32>) -> !relax.tensor<["n"], f32>
  return %s : !relax.tensor<["n"], f32>
}

// x - x on the bits in the kernels: Mesa folds the float form to +0.0 (NaN for an infinite or NaN x).
// CHECK-LABEL: gpu.module @self_minus_kernel
// CHECK: gpu.func
// CHECK-NOT: arith.subf
// CHECK: %[[B:.*]] = arith.bitcast %{{.*}} : f32 to i32
// CHECK: %[[A:.*]] = arith.andi %[[B]], %c2147483647_i32
// CHECK: %[[F:.*]] = arith.cmpi ult, %[[A]], %c2139095040_i32
// CHECK: %[[R:.*]] = arith.select %[[F]], %c0_i32, %c2143289344_i32
// CHECK: arith.bitcast %[[R]] : i32 to f32
// CHECK-NOT: arith.subf
// CHECK: gpu.return
func.func @self_minus(%x: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32> {
  %d = "relax.subtract"(%x, %x) : (!relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  return %d : !relax.tensor<["n"], f32>
}

// A cumulative sum (one elementwise step a position) runs as one kernel: each invocation scans
// one column in order (was a host loop of two launches a position).
// CHECK-LABEL: func.func @cumsum
// CHECK-NOT: scf.for
// CHECK: gpu.launch_func
// CHECK-NOT: scf.for
// CHECK: gpu.launch_func @[[SCAN:[a-z_0-9]+]]::@{{.*}} {relax.loop_cost
// CHECK-NOT: gpu.launch_func
// CHECK: return
// CHECK: gpu.module @[[SCAN]]
// CHECK: scf.for %{{.*}} = %c0 to %c8 step %c1 {
// CHECK:   memref.load
// CHECK:   arith.addf
// CHECK:   memref.store
func.func @cumsum(%x: !relax.tensor<[8, "n"], f32>) -> !relax.tensor<[8, "n"], f32> {
  %0 = "relax.reduce_window"(%x) {kind = "sum", window = [8, 1], strides = [1, 1], pad_lo = [7, 0], pad_hi = [0, 0]} : (!relax.tensor<[8, "n"], f32>) -> !relax.tensor<[8, "n"], f32>
  return %0 : !relax.tensor<[8, "n"], f32>
}

// At most 65535 workgroups a grid dimension (Vulkan's minimum): each workgroup of a kernel over a
// symbolic size takes every 65535th tile of 32.
// CHECK-LABEL: func.func @big
// CHECK: %[[N:.*]] = memref.dim %arg0, %c0
// CHECK: %[[CAP:.*]] = arith.minsi %[[N]], %c2097120
// CHECK: gpu.launch_func {{.*}}args(%[[N]] : index
// CHECK: gpu.module @big_kernel
// CHECK: %[[T:.*]] = arith.muli %block_id_x, %c32
// CHECK: scf.for %{{.*}} = %[[T]] to %arg0 step %c2097120 {
// CHECK:   math.exp
func.func @big(%x: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32> {
  %e = "relax.exp"(%x) : (!relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  return %e : !relax.tensor<["n"], f32>
}
