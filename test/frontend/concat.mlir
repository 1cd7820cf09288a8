// RUN: relax-import-stablehlo %s | FileCheck %s
// RUN: relax-import-stablehlo %s | relax-opt --relax-infer-shapes | FileCheck %s --check-prefix=INFER
// CHECK-LABEL: func.func @main(%arg0: !relax.tensor<["b", 8], f32>, %arg1: !relax.tensor<["s", 8], f32>)
// The jax dimension variables (jax.global_constant "b", "s") are >= 1, as jax.export assumes.
// CHECK-SAME: attributes {relax.symbol_lower = {b = 1 : i64, s = 1 : i64}}
// CHECK: "relax_v.concat"(%arg0, %arg1) {axis = 0 : i64}
// INFER: -> !relax.tensor<["b + s", 8], f32>

module @jit__lambda attributes {jax.uses_shape_polymorphism = true, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<?x8xf32>, %arg1: tensor<?x8xf32>) -> (tensor<?x8xf32> {jax.result_info = "result"}) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0 = stablehlo.get_dimension_size %arg0, dim = 0 : (tensor<?x8xf32>) -> tensor<i32>
    %1 = stablehlo.get_dimension_size %arg1, dim = 0 : (tensor<?x8xf32>) -> tensor<i32>
    %2 = stablehlo.compare GE, %0, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.custom_call @shape_assertion(%2, %0) {api_version = 2 : i32, error_message = "shape assertion", has_side_effect = true} : (tensor<i1>, tensor<i32>) -> ()
    %3 = stablehlo.compare GE, %1, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.custom_call @shape_assertion(%3, %0, %1) {api_version = 2 : i32, error_message = "shape assertion", has_side_effect = true} : (tensor<i1>, tensor<i32>, tensor<i32>) -> ()
    %4 = call @_wrapped_jax_export_main(%0, %1, %arg0, %arg1) : (tensor<i32>, tensor<i32>, tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    return %4 : tensor<?x8xf32>
  }
  func.func private @_wrapped_jax_export_main(%arg0: tensor<i32> {jax.global_constant = "b"}, %arg1: tensor<i32> {jax.global_constant = "s"}, %arg2: tensor<?x8xf32>, %arg3: tensor<?x8xf32>) -> (tensor<?x8xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.concatenate %arg2, %arg3, dim = 0 : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    return %0 : tensor<?x8xf32>
  }
}
