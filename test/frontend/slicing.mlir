// RUN: relax-import-stablehlo %s | FileCheck %s
// RUN: relax-import-stablehlo %s | relax-opt --relax-infer-shapes | FileCheck %s --check-prefix=INFER
// jnp.split of [b, s, 12] in 3 (real_dynamic_slice with get_dimension_size bounds), a KV-cache
// lax.dynamic_update_slice at a run-time position, lax.dynamic_slice, lax.pad with interior and
// negative padding, jnp.flip: every result dim deduced symbolically.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:[a-z0-9]+]]: !relax.tensor<["b", "s", 12], f32>, %[[C:[a-z0-9]+]]: !relax.tensor<["b", 16, 4], f32>, %[[P:[a-z0-9]+]]: !relax.tensor<[], i32>)
// CHECK-SAME: -> (!relax.tensor<["b", 16, 4], f32>, !relax.tensor<[1, 2, 4], f32>, !relax.tensor<["b", "2*s - 1", 6], f32>, !relax.tensor<["b", "s", 4], f32>)
// CHECK: %[[Q:.*]] = "relax.strided_slice"(%[[X]]) {axes = [0, 1, 2], begin = [0, 0, 0], end = ["b", "s", 4], strides = [1, 1, 1]} : (!relax.tensor<["b", "s", 12], f32>) -> !relax.tensor<["b", "s", 4], f32>
// CHECK: %[[K:.*]] = "relax.strided_slice"(%[[X]]) {axes = [0, 1, 2], begin = [0, 0, 4], end = ["b", "s", 8], strides = [1, 1, 1]}
// CHECK: %[[V:.*]] = "relax.strided_slice"(%[[X]]) {axes = [0, 1, 2], begin = [0, 0, 8], end = ["b", "s", 12], strides = [1, 1, 1]}
// CHECK: %[[K1:.*]] = "relax.strided_slice"(%[[K]]) {{.*}} -> !relax.tensor<["b", 1, 4], f32>
// CHECK: %[[ZERO:.*]] = "relax.constant"() {value = dense<0> : tensor<i32>}
// CHECK: %[[POS:.*]] = "relax.where"
// CHECK: %[[UPD:.*]] = "relax.dynamic_update_slice"(%[[C]], %[[K1]], %[[ZERO]], %[[POS]], %[[ZERO]]) : ({{.*}}) -> !relax.tensor<["b", 16, 4], f32>
// CHECK: %[[POS2:.*]] = "relax.where"
// CHECK: %[[W:.*]] = "relax.dynamic_slice"(%[[UPD]], %[[ZERO]], %[[POS2]], %[[ZERO]]) {sizes = [1, 2, 4]} : ({{.*}}) -> !relax.tensor<[1, 2, 4], f32>
// CHECK: %[[PAD:.*]] = "relax.pad"(%[[Q]], %{{.*}}) {high = [0, -1, 0], interior = [0, 1, 0], low = [0, 1, 2]} : ({{.*}}) -> !relax.tensor<["b", "2*s - 1", 6], f32>
// CHECK: %[[R:.*]] = "relax.reverse"(%[[V]]) {dimensions = [1]} : (!relax.tensor<["b", "s", 4], f32>) -> !relax.tensor<["b", "s", 4], f32>
// CHECK: return %[[UPD]], %[[W]], %[[PAD]], %[[R]]
// INFER-LABEL: func.func @main
// INFER: "relax.dynamic_update_slice"{{.*}} -> !relax.tensor<["b", 16, 4], f32>
// INFER: "relax.dynamic_slice"{{.*}} -> !relax.tensor<[1, 2, 4], f32>
// INFER: "relax.pad"{{.*}} -> !relax.tensor<["b", "2*s - 1", 6], f32>
// INFER: "relax.reverse"{{.*}} -> !relax.tensor<["b", "s", 4], f32>

module @jit_f attributes {jax.uses_shape_polymorphism = true, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<?x?x12xf32>, %arg1: tensor<?x16x4xf32>, %arg2: tensor<i32>) -> (tensor<?x16x4xf32> {jax.result_info = "result[0]"}, tensor<1x2x4xf32> {jax.result_info = "result[1]"}, tensor<?x?x6xf32> {jax.result_info = "result[2]"}, tensor<?x?x4xf32> {jax.result_info = "result[3]"}) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0 = stablehlo.get_dimension_size %arg0, dim = 0 : (tensor<?x?x12xf32>) -> tensor<i32>
    %1 = stablehlo.get_dimension_size %arg0, dim = 1 : (tensor<?x?x12xf32>) -> tensor<i32>
    %2 = stablehlo.get_dimension_size %arg1, dim = 0 : (tensor<?x16x4xf32>) -> tensor<i32>
    %3 = stablehlo.compare GE, %0, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.custom_call @shape_assertion(%3, %0) {api_version = 2 : i32, error_message = "Input shapes do not match the polymorphic shapes specification. Expected value >= 1 for dimension variable 'b'. Using the following polymorphic shapes specifications: args[0].shape = (b, s, 12),args[1].shape = (b, 16, 4). Obtained dimension variables: 'b' = {0} from specification 'b' for dimension args[0].shape[0] (= {0}), . Please see https://docs.jax.dev/en/latest/export/shape_poly.html#shape-assertion-errors for more details.", has_side_effect = true} : (tensor<i1>, tensor<i32>) -> ()
    %4 = stablehlo.compare GE, %1, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.custom_call @shape_assertion(%4, %0, %1) {api_version = 2 : i32, error_message = "Input shapes do not match the polymorphic shapes specification. Expected value >= 1 for dimension variable 's'. Using the following polymorphic shapes specifications: args[0].shape = (b, s, 12),args[1].shape = (b, 16, 4). Obtained dimension variables: 'b' = {0} from specification 'b' for dimension args[0].shape[0] (= {0}), 's' = {1} from specification 's' for dimension args[0].shape[1] (= {1}), . Please see https://docs.jax.dev/en/latest/export/shape_poly.html#shape-assertion-errors for more details.", has_side_effect = true} : (tensor<i1>, tensor<i32>, tensor<i32>) -> ()
    %5 = stablehlo.compare EQ, %2, %0, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.custom_call @shape_assertion(%5, %2, %0, %1) {api_version = 2 : i32, error_message = "Input shapes do not match the polymorphic shapes specification. Found inconsistency between dimension size args[1].shape[0] (= {0}) and the specification 'b' (= {1}). Using the following polymorphic shapes specifications: args[0].shape = (b, s, 12),args[1].shape = (b, 16, 4). Obtained dimension variables: 'b' = {1} from specification 'b' for dimension args[0].shape[0] (= {1}), 's' = {2} from specification 's' for dimension args[0].shape[1] (= {2}), . Please see https://docs.jax.dev/en/latest/export/shape_poly.html#shape-assertion-errors for more details.", has_side_effect = true} : (tensor<i1>, tensor<i32>, tensor<i32>, tensor<i32>) -> ()
    %6:4 = call @_wrapped_jax_export_main(%0, %1, %arg0, %arg1, %arg2) : (tensor<i32>, tensor<i32>, tensor<?x?x12xf32>, tensor<?x16x4xf32>, tensor<i32>) -> (tensor<?x16x4xf32>, tensor<1x2x4xf32>, tensor<?x?x6xf32>, tensor<?x?x4xf32>)
    return %6#0, %6#1, %6#2, %6#3 : tensor<?x16x4xf32>, tensor<1x2x4xf32>, tensor<?x?x6xf32>, tensor<?x?x4xf32>
  }
  func.func private @_wrapped_jax_export_main(%arg0: tensor<i32> {jax.global_constant = "b"}, %arg1: tensor<i32> {jax.global_constant = "s"}, %arg2: tensor<?x?x12xf32>, %arg3: tensor<?x16x4xf32>, %arg4: tensor<i32>) -> (tensor<?x16x4xf32> {jax.result_info = "result[0]"}, tensor<1x2x4xf32> {jax.result_info = "result[1]"}, tensor<?x?x6xf32> {jax.result_info = "result[2]"}, tensor<?x?x4xf32> {jax.result_info = "result[3]"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %c = stablehlo.constant dense<16> : tensor<i32>
    %c_0 = stablehlo.constant dense<12> : tensor<1xi32>
    %c_1 = stablehlo.constant dense<8> : tensor<1xi32>
    %c_2 = stablehlo.constant dense<1> : tensor<1xi32>
    %c_3 = stablehlo.constant dense<4> : tensor<1xi32>
    %c_4 = stablehlo.constant dense<0> : tensor<i32>
    %c_5 = stablehlo.constant dense<0> : tensor<1xi32>
    %0 = stablehlo.concatenate %c_5, %c_5, %c_5, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
    %1 = stablehlo.reshape %arg0 : (tensor<i32>) -> tensor<1xi32>
    %2 = stablehlo.reshape %arg1 : (tensor<i32>) -> tensor<1xi32>
    %3 = stablehlo.concatenate %1, %2, %c_3, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
    %4 = stablehlo.concatenate %c_2, %c_2, %c_2, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
    %5 = stablehlo.real_dynamic_slice %arg2, %0, %3, %4 : (tensor<?x?x12xf32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>) -> tensor<?x?x4xf32>
    %6 = stablehlo.concatenate %c_5, %c_5, %c_3, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
    %7 = stablehlo.reshape %arg0 : (tensor<i32>) -> tensor<1xi32>
    %8 = stablehlo.reshape %arg1 : (tensor<i32>) -> tensor<1xi32>
    %9 = stablehlo.concatenate %7, %8, %c_1, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
    %10 = stablehlo.concatenate %c_2, %c_2, %c_2, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
    %11 = stablehlo.real_dynamic_slice %arg2, %6, %9, %10 : (tensor<?x?x12xf32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>) -> tensor<?x?x4xf32>
    %12 = stablehlo.concatenate %c_5, %c_5, %c_1, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
    %13 = stablehlo.reshape %arg0 : (tensor<i32>) -> tensor<1xi32>
    %14 = stablehlo.reshape %arg1 : (tensor<i32>) -> tensor<1xi32>
    %15 = stablehlo.concatenate %13, %14, %c_0, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
    %16 = stablehlo.concatenate %c_2, %c_2, %c_2, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
    %17 = stablehlo.real_dynamic_slice %arg2, %12, %15, %16 : (tensor<?x?x12xf32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>) -> tensor<?x?x4xf32>
    %18 = stablehlo.broadcast_in_dim %c_4, dims = [] : (tensor<i32>) -> tensor<1xi32>
    %19 = stablehlo.reshape %arg0 : (tensor<i32>) -> tensor<1xi32>
    %20 = stablehlo.concatenate %19, %c_2, %c_3, dim = 0 : (tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<3xi32>
    %21 = "stablehlo.dynamic_gather"(%11, %18, %20) <{dimension_numbers = #stablehlo.gather<offset_dims = [0, 1, 2], start_index_map = [1]>, indices_are_sorted = true}> : (tensor<?x?x4xf32>, tensor<1xi32>, tensor<3xi32>) -> tensor<?x1x4xf32>
    %22 = stablehlo.compare LT, %arg4, %c_4, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %23 = stablehlo.add %arg4, %c : tensor<i32>
    %24 = stablehlo.select %22, %23, %arg4 : tensor<i1>, tensor<i32>
    %25 = stablehlo.dynamic_update_slice %arg3, %21, %c_4, %24, %c_4 : (tensor<?x16x4xf32>, tensor<?x1x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<?x16x4xf32>
    %26 = stablehlo.compare LT, %arg4, %c_4, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %27 = stablehlo.add %arg4, %c : tensor<i32>
    %28 = stablehlo.select %26, %27, %arg4 : tensor<i1>, tensor<i32>
    %29 = stablehlo.dynamic_slice %25, %c_4, %28, %c_4, sizes = [1, 2, 4] : (tensor<?x16x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x4xf32>
    %30 = stablehlo.pad %5, %cst, low = [0, 1, 2], high = [0, -1, 0], interior = [0, 1, 0] : (tensor<?x?x4xf32>, tensor<f32>) -> tensor<?x?x6xf32>
    %31 = call @_flip(%arg0, %arg1, %17) : (tensor<i32>, tensor<i32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
    return %25, %29, %30, %31 : tensor<?x16x4xf32>, tensor<1x2x4xf32>, tensor<?x?x6xf32>, tensor<?x?x4xf32>
  }
  func.func private @_flip(%arg0: tensor<i32> {jax.global_constant = "b"}, %arg1: tensor<i32> {jax.global_constant = "s"}, %arg2: tensor<?x?x4xf32>) -> tensor<?x?x4xf32> {
    %0 = stablehlo.reverse %arg2, dims = [1] : tensor<?x?x4xf32>
    return %0 : tensor<?x?x4xf32>
  }
}

