// RUN: relax-import-stablehlo %s | FileCheck %s
// RUN: relax-import-stablehlo %s | relax-opt --relax-infer-shapes --relax-legalize | FileCheck %s --check-prefix=LEG
// jax.export of (b, n, 4) x (3, 4, 6): a max pool (window 3, stride 2, padding 1), a reverse cumsum
// (at a symbolic length: the custom call @stablehlo.dynamic_reduce_window, window n, padding n - 1)
// and an NWC/WIO conv with stride 2, padding (1, 0) and rhs dilation 2.
// CHECK-LABEL: func.func @main(%arg0: !relax.tensor<["b", "n", 4], f32>, %arg1: !relax.tensor<[3, 4, 6], f32>)
// CHECK-SAME: -> (!relax.tensor<["b", "floordiv(n + 1, 2)", 4], f32>, !relax.tensor<["b", "n", 4], f32>, !relax.tensor<["b", "max(0, floordiv(n, 2) - 1)", 6], f32>)
// CHECK: %[[P:.*]] = "relax.reduce_window"(%arg0) {base_dilation = [1, 1, 1], kind = "max", pad_hi = [0, 1, 0], pad_lo = [0, 1, 0], strides = [1, 2, 1], window = [1, 3, 1], window_dilation = [1, 1, 1]}
// CHECK-SAME: -> !relax.tensor<["b", "floordiv(n + 1, 2)", 4], f32>
// The init value -inf is max's identity: no relax.maximum with it.
// CHECK-NOT: "relax.maximum"
// CHECK: %[[C:.*]] = "relax.reduce_window"(%arg0) {base_dilation = [1, 1, 1], kind = "sum", pad_hi = [0, "n - 1", 0], pad_lo = [0, 0, 0], strides = [1, 1, 1], window = [1, "n", 1], window_dilation = [1, 1, 1]}
// CHECK-SAME: -> !relax.tensor<["b", "n", 4], f32>
// CHECK: %[[X:.*]] = "relax.permute_dims"(%arg0) {axes = [0, 2, 1]}
// CHECK: %[[W:.*]] = "relax.permute_dims"(%arg1) {axes = [2, 1, 0]}
// CHECK: %[[Y:.*]] = "relax.conv"(%[[X]], %[[W]]) {batch_group_count = 1 : i64, feature_group_count = 1 : i64, lhs_dilation = [1], pad_hi = [0], pad_lo = [1], rhs_dilation = [2], strides = [2]}
// CHECK-SAME: (!relax.tensor<["b", 4, "n"], f32>, !relax.tensor<[6, 4, 3], f32>) -> !relax.tensor<["b", 6, "max(0, floordiv(n, 2) - 1)"], f32>
// CHECK: %[[R:.*]] = "relax.permute_dims"(%[[Y]]) {axes = [0, 2, 1]}
// CHECK: return %[[P]], %[[C]], %[[R]]

// The cumsum is recognized as a cumulative reduction: an O(n) scan (scf.for, reversed), not a
// window of n at every position.
// LEG: "relax_v.call_tir"(%arg0) {callee = @cumulative}
// LEG-LABEL: func.func private @reduce_window(
// LEG: %[[PAD:.*]] = tensor.pad %arg0 low[0, 1, 0] high[0, 1, 0]
// LEG: %[[WIN:.*]] = tensor.empty() : tensor<1x3x1xf32>
// LEG: linalg.generic {{.*}} ins(%[[PAD]], %[[WIN]] : tensor<?x?x4xf32>, tensor<1x3x1xf32>)
// LEG: arith.maximumf
// LEG-LABEL: func.func private @cumulative(
// LEG: %[[N:.*]] = tensor.dim %arg0, %c1
// LEG: scf.for %[[I:.*]] = %c0 to %[[N]] step %c1
// LEG: %[[LAST:.*]] = arith.subi %[[N]], %c1
// LEG: %[[POS:.*]] = arith.subi %[[LAST]], %[[I]]
// LEG: tensor.extract_slice %arg0[0, %[[POS]], 0]
// LEG: arith.addf
// LEG: tensor.insert_slice
// LEG-LABEL: func.func private @conv(
// LEG: tensor.pad %arg0 low[0, 0, 1] high[0, 0, 0]
// LEG: linalg.generic
// LEG-SAME: iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "parallel"]
// LEG: arith.mulf
// LEG: arith.addf
// LEG: tensor.collapse_shape

module @jit_f attributes {jax.uses_shape_polymorphism = true, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<?x?x4xf32>, %arg1: tensor<3x4x6xf32>) -> (tensor<?x?x4xf32> {jax.result_info = "result[0]"}, tensor<?x?x4xf32> {jax.result_info = "result[1]"}, tensor<?x?x6xf32> {jax.result_info = "result[2]"}) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0 = stablehlo.get_dimension_size %arg0, dim = 0 : (tensor<?x?x4xf32>) -> tensor<i32>
    %1 = stablehlo.get_dimension_size %arg0, dim = 1 : (tensor<?x?x4xf32>) -> tensor<i32>
    %2 = stablehlo.compare GE, %0, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %3 = stablehlo.compare GE, %1, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %4:3 = call @_wrapped_jax_export_main(%0, %1, %arg0, %arg1) : (tensor<i32>, tensor<i32>, tensor<?x?x4xf32>, tensor<3x4x6xf32>) -> (tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x?x6xf32>)
    return %4#0, %4#1, %4#2 : tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x?x6xf32>
  }
  func.func @reduce_window_float32_reducer(%arg0: tensor<f32>, %arg1: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<f32>
    return %0 : tensor<f32>
  }
  func.func private @_wrapped_jax_export_main(%arg0: tensor<i32> {jax.global_constant = "b"}, %arg1: tensor<i32> {jax.global_constant = "n"}, %arg2: tensor<?x?x4xf32>, %arg3: tensor<3x4x6xf32>) -> (tensor<?x?x4xf32> {jax.result_info = "result[0]"}, tensor<?x?x4xf32> {jax.result_info = "result[1]"}, tensor<?x?x6xf32> {jax.result_info = "result[2]"}) {
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<f32>
    %1 = "stablehlo.reduce_window"(%arg2, %0) <{padding = dense<[[0, 0], [1, 1], [0, 0]]> : tensor<3x2xi64>, window_dimensions = array<i64: 1, 3, 1>, window_strides = array<i64: 1, 2, 1>}> ({
    ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>):
      %4 = stablehlo.maximum %arg4, %arg5 : tensor<f32>
      stablehlo.return %4 : tensor<f32>
    }) : (tensor<?x?x4xf32>, tensor<f32>) -> tensor<?x?x4xf32>
    %2 = call @cumsum(%arg0, %arg1, %arg2) : (tensor<i32>, tensor<i32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
    %3 = stablehlo.convolution(%arg2, %arg3) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [2], pad = [[1, 0]], rhs_dilate = [2]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<?x?x4xf32>, tensor<3x4x6xf32>) -> tensor<?x?x6xf32>
    return %1, %2, %3 : tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x?x6xf32>
  }
  func.func private @cumsum(%arg0: tensor<i32>, %arg1: tensor<i32>, %arg2: tensor<?x?x4xf32>) -> tensor<?x?x4xf32> {
    %c = stablehlo.constant dense<1> : tensor<1xi32>
    %c_0 = stablehlo.constant dense<-1> : tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<1xi32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<f32>
    %1 = stablehlo.concatenate %c_1, %c_1, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %2 = stablehlo.reshape %1 : (tensor<2xi32>) -> tensor<1x2xi32>
    %3 = stablehlo.convert %arg1 : tensor<i32>
    %4 = stablehlo.add %3, %c_0 : tensor<i32>
    %5 = stablehlo.reshape %4 : (tensor<i32>) -> tensor<1xi32>
    %6 = stablehlo.concatenate %c_1, %5, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %7 = stablehlo.reshape %6 : (tensor<2xi32>) -> tensor<1x2xi32>
    %8 = stablehlo.concatenate %c_1, %c_1, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %9 = stablehlo.reshape %8 : (tensor<2xi32>) -> tensor<1x2xi32>
    %10 = stablehlo.concatenate %2, %7, %9, dim = 0 : (tensor<1x2xi32>, tensor<1x2xi32>, tensor<1x2xi32>) -> tensor<3x2xi32>
    %11 = stablehlo.reshape %arg1 : (tensor<i32>) -> tensor<1xi32>
    %12 = stablehlo.concatenate %c, %11, %c, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
    %13 = stablehlo.concatenate %c, %c, %c, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
    %14 = stablehlo.concatenate %c, %c, %c, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
    %15 = stablehlo.concatenate %c, %c, %c, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
    %16 = stablehlo.custom_call @stablehlo.dynamic_reduce_window(%arg2, %0, %12, %13, %14, %15, %10) {api_version = 2 : i32, called_computations = [@reduce_window_float32_reducer]} : (tensor<?x?x4xf32>, tensor<f32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3x2xi32>) -> tensor<?x?x4xf32>
    return %16 : tensor<?x?x4xf32>
  }
}
