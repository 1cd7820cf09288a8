// RUN: relax-import-stablehlo %s | FileCheck %s
// RUN: relax-import-stablehlo %s | relax-opt --relax-infer-shapes | FileCheck %s --check-prefix=INFER
// CHECK-LABEL: func.func @main(%arg0: !relax.tensor<["b", 64], f32>, %arg1: !relax.tensor<[64, 32], f32>)
// CHECK: "relax.matmul"(%arg0, %arg1)
// CHECK: "relax.broadcast_to"({{.*}}) {shape = ["b", 32]}
// CHECK: "relax.maximum"
// CHECK-NOT: shape_assertion
// INFER: func.func @main(%arg0: !relax.tensor<["b", 64], f32>, %arg1: !relax.tensor<[64, 32], f32>) -> !relax.tensor<["b", 32], f32>

module @jit__lambda attributes {jax.uses_shape_polymorphism = true, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<?x64xf32>, %arg1: tensor<64x32xf32>) -> (tensor<?x32xf32> {jax.result_info = "result"}) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0 = stablehlo.get_dimension_size %arg0, dim = 0 : (tensor<?x64xf32>) -> tensor<i32>
    %1 = stablehlo.compare GE, %0, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.custom_call @shape_assertion(%1, %0) {api_version = 2 : i32, error_message = "shape assertion", has_side_effect = true} : (tensor<i1>, tensor<i32>) -> ()
    %2 = call @_wrapped_jax_export_main(%0, %arg0, %arg1) : (tensor<i32>, tensor<?x64xf32>, tensor<64x32xf32>) -> tensor<?x32xf32>
    return %2 : tensor<?x32xf32>
  }
  func.func private @_wrapped_jax_export_main(%arg0: tensor<i32> {jax.global_constant = "b"}, %arg1: tensor<?x64xf32>, %arg2: tensor<64x32xf32>) -> (tensor<?x32xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.dot_general %arg1, %arg2, contracting_dims = [1] x [0] : (tensor<?x64xf32>, tensor<64x32xf32>) -> tensor<?x32xf32>
    %1 = call @relu(%arg0, %0) : (tensor<i32>, tensor<?x32xf32>) -> tensor<?x32xf32>
    return %1 : tensor<?x32xf32>
  }
  func.func private @relu(%arg0: tensor<i32> {jax.global_constant = "b"}, %arg1: tensor<?x32xf32>) -> tensor<?x32xf32> {
    %c = stablehlo.constant dense<32> : tensor<1xi32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.reshape %arg0 : (tensor<i32>) -> tensor<1xi32>
    %1 = stablehlo.concatenate %0, %c, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %2 = stablehlo.dynamic_broadcast_in_dim %cst, %1, dims = [] : (tensor<f32>, tensor<2xi32>) -> tensor<?x32xf32>
    %3 = stablehlo.maximum %arg1, %2 : tensor<?x32xf32>
    return %3 : tensor<?x32xf32>
  }
}
