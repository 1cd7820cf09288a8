// RUN: relax-opt %s --split-input-file --relax-conv-to-matmul --relax-canonicalize | FileCheck %s
// RUN: relax-opt %s --split-input-file --relax-conv-to-matmul --relax-canonicalize --relax-legalize | FileCheck %s --check-prefix=KERNEL

// jax's NHWC convolution (a transpose on each side of the canonical relax.conv): the windows of
// the channels-last input are read in place, the kernel's HWIO layout is already the product's
// [K * C, O] matrix and the product's rows are the NHWC output: no transpose is left.
// CHECK-LABEL: func.func @nhwc
// CHECK-SAME: (%[[X:.*]]: !relax.tensor<["b", "h", 9, 3], f32>, %[[W:.*]]: !relax.tensor<[3, 2, 3, 8], f32>)
// CHECK-NOT: relax.permute_dims
// CHECK: %[[P:.*]] = "relax.window_patches"(%[[X]]) {pad_hi = [1, 0], pad_lo = [1, 0], strides = [1, 2], window = [3, 2]} : (!relax.tensor<["b", "h", 9, 3], f32>) -> !relax.tensor<["b", "h", 4, 3, 2, 3], f32>
// CHECK: %[[A:.*]] = "relax.reshape"(%[[P]]) {shape = ["4*b*h", 18]}
// CHECK: %[[B:.*]] = "relax.reshape"(%[[W]]) {shape = [18, 8]}
// CHECK: %[[M:.*]] = "relax.matmul"(%[[A]], %[[B]]) : (!relax.tensor<["4*b*h", 18], f32>, !relax.tensor<[18, 8], f32>) -> !relax.tensor<["4*b*h", 8], f32>
// CHECK: %[[Y:.*]] = "relax.reshape"(%[[M]]) {shape = ["b", "h", 4, 8]}
// CHECK-NOT: relax.permute_dims
// CHECK: return %[[Y]]
// The windows are one copy kernel of the zero-padded input: loops (b, q0, q1, k0, k1, c).
// KERNEL: #[[IN:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1 + d3, d2 * 2 + d4, d5)>
// KERNEL: #[[OUT:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4, d5)>
// KERNEL-LABEL: func.func private @window_patches
// KERNEL: %[[PAD:.*]] = tensor.pad %{{.*}} low[0, 1, 0, 0] high[0, 1, 0, 0]
// KERNEL: linalg.generic {indexing_maps = [#[[IN]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%[[PAD]] : tensor<?x?x9x3xf32>) outs(%{{.*}} : tensor<?x?x4x3x2x3xf32>)
func.func @nhwc(%x: !relax.tensor<["b", "h", 9, 3], f32>, %w: !relax.tensor<[3, 2, 3, 8], f32>) -> !relax.tensor<["b", "h", 4, 8], f32> {
  %xc = "relax.permute_dims"(%x) {axes = [0, 3, 1, 2]} : (!relax.tensor<["b", "h", 9, 3], f32>) -> !relax.tensor<["b", 3, "h", 9], f32>
  %wc = "relax.permute_dims"(%w) {axes = [3, 2, 0, 1]} : (!relax.tensor<[3, 2, 3, 8], f32>) -> !relax.tensor<[8, 3, 3, 2], f32>
  %y = "relax.conv"(%xc, %wc) {strides = [1, 2], pad_lo = [1, 0], pad_hi = [1, 0]} : (!relax.tensor<["b", 3, "h", 9], f32>, !relax.tensor<[8, 3, 3, 2], f32>) -> !relax.tensor<["b", 8, "h", 4], f32>
  %yl = "relax.permute_dims"(%y) {axes = [0, 2, 3, 1]} : (!relax.tensor<["b", 8, "h", 4], f32>) -> !relax.tensor<["b", "h", 4, 8], f32>
  return %yl : !relax.tensor<["b", "h", 4, 8], f32>
}

// -----

// A 1x1 convolution at stride 1 is the product of the channels-last input itself.
// CHECK-LABEL: func.func @pointwise
// CHECK-NOT: relax.window_patches
// CHECK: %[[T:.*]] = "relax.permute_dims"(%{{.*}}) {axes = [0, 2, 1]}
// CHECK: %[[A:.*]] = "relax.reshape"(%[[T]]) {shape = ["5*n", 4]}
// CHECK: "relax.matmul"(%[[A]], %{{.*}}) : (!relax.tensor<["5*n", 4], f32>, !relax.tensor<[4, 6], f32>) -> !relax.tensor<["5*n", 6], f32>
func.func @pointwise(%x: !relax.tensor<["n", 4, 5], f32>, %w: !relax.tensor<[6, 4, 1], f32>) -> !relax.tensor<["n", 6, 5], f32> {
  %y = "relax.conv"(%x, %w) : (!relax.tensor<["n", 4, 5], f32>, !relax.tensor<[6, 4, 1], f32>) -> !relax.tensor<["n", 6, 5], f32>
  return %y : !relax.tensor<["n", 6, 5], f32>
}

// -----

// Kept as the direct kernel: grouped (depthwise) convolutions, bf16 ones and windows of more than
// 64 positions.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: relax.window_patches
// CHECK: "relax.conv"
// CHECK: "relax.conv"
// CHECK: "relax.conv"
func.func @kept(%x: !relax.tensor<["n", 4, 5], f32>, %w: !relax.tensor<[4, 1, 3], f32>, %xb: !relax.tensor<["n", 4, 5], bf16>, %wb: !relax.tensor<[2, 4, 3], bf16>, %xl: !relax.tensor<["n", 4, 70], f32>, %wl: !relax.tensor<[2, 4, 65], f32>) -> (!relax.tensor<["n", 4, 3], f32>, !relax.tensor<["n", 2, 3], bf16>, !relax.tensor<["n", 2, 6], f32>) {
  %y = "relax.conv"(%x, %w) {feature_group_count = 4} : (!relax.tensor<["n", 4, 5], f32>, !relax.tensor<[4, 1, 3], f32>) -> !relax.tensor<["n", 4, 3], f32>
  %z = "relax.conv"(%xb, %wb) : (!relax.tensor<["n", 4, 5], bf16>, !relax.tensor<[2, 4, 3], bf16>) -> !relax.tensor<["n", 2, 3], bf16>
  %l = "relax.conv"(%xl, %wl) : (!relax.tensor<["n", 4, 70], f32>, !relax.tensor<[2, 4, 65], f32>) -> !relax.tensor<["n", 2, 6], f32>
  return %y, %z, %l : !relax.tensor<["n", 4, 3], f32>, !relax.tensor<["n", 2, 3], bf16>, !relax.tensor<["n", 2, 6], f32>
}
