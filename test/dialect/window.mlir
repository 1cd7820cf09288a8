// RUN: relax-opt %s --split-input-file --relax-infer-shapes | FileCheck %s
// Deduced result types of relax.reduce_window and relax.conv with symbolic dims.

// Window 3, stride 2, padding 1 each side: floor((n + 2 - 3) / 2) + 1.
// CHECK-LABEL: func.func @pool
// CHECK: "relax.reduce_window"(%arg0) {{.*}} -> !relax.tensor<["b", "floordiv(n + 1, 2)", 4], f32>
func.func @pool(%x: !relax.tensor<["b", "n", 4], f32>) -> !relax.tensor<["?", "?", "?"], f32> attributes {relax.symbol_lower = {b = 1, n = 1}} {
  %0 = "relax.reduce_window"(%x) {kind = "max", window = [1, 3, 1], strides = [1, 2, 1], pad_lo = [0, 1, 0], pad_hi = [0, 1, 0]} : (!relax.tensor<["b", "n", 4], f32>) -> !relax.tensor<["?", "?", "?"], f32>
  return %0 : !relax.tensor<["?", "?", "?"], f32>
}

// -----

// Base dilation 2 and window dilation 3: max(0, 2n - 1) elements, a window spanning 4; a symbol
// that may be 0 keeps the clamps.
// CHECK-LABEL: func.func @dilated
// CHECK: "relax.reduce_window"(%arg0) {{.*}} -> !relax.tensor<["max(0, max(0, 2*n - 1) - 3)"], f32>
func.func @dilated(%x: !relax.tensor<["n"], f32>) -> !relax.tensor<["?"], f32> {
  %0 = "relax.reduce_window"(%x) {kind = "sum", window = [2], base_dilation = [2], window_dilation = [3]} : (!relax.tensor<["n"], f32>) -> !relax.tensor<["?"], f32>
  return %0 : !relax.tensor<["?"], f32>
}

// -----

// A cumulative sum: the window is the whole symbolic dim, padded by n - 1 before it.
// CHECK-LABEL: func.func @cumsum
// CHECK: "relax.reduce_window"(%arg0) {{.*}} -> !relax.tensor<["b", "n"], f32>
func.func @cumsum(%x: !relax.tensor<["b", "n"], f32>) -> !relax.tensor<["?", "?"], f32> attributes {relax.symbol_lower = {b = 1, n = 1}} {
  %0 = "relax.reduce_window"(%x) {kind = "sum", window = [1, "n"], pad_lo = [0, "n - 1"], pad_hi = [0, 0]} : (!relax.tensor<["b", "n"], f32>) -> !relax.tensor<["?", "?"], f32>
  return %0 : !relax.tensor<["?", "?"], f32>
}

// -----

// Grouped conv (2 groups of 2 input features), stride 2, rhs dilation 2 (a kernel spanning 5),
// symbolic padding: floor((n + p - 5) / 2) + 1.
// CHECK-LABEL: func.func @conv
// CHECK: "relax.conv"(%arg0, %arg1) {{.*}} -> !relax.tensor<["b", 6, "floordiv(n + p + 1, 2) - 2", 7], f32>
func.func @conv(%x: !relax.tensor<["b", 4, "n", 7], f32>, %w: !relax.tensor<[6, 2, 3, 3], f32>, %p: !relax.tensor<["p"], f32>) -> !relax.tensor<["?", "?", "?", "?"], f32> attributes {relax.symbol_lower = {b = 1, n = 5, p = 0}} {
  %0 = "relax.conv"(%x, %w) {feature_group_count = 2, strides = [2, 1], rhs_dilation = [2, 1], pad_lo = ["p", 1], pad_hi = [0, 1]} : (!relax.tensor<["b", 4, "n", 7], f32>, !relax.tensor<[6, 2, 3, 3], f32>) -> !relax.tensor<["?", "?", "?", "?"], f32>
  return %0 : !relax.tensor<["?", "?", "?", "?"], f32>
}
