// RUN: relax-import-stablehlo %s | FileCheck %s
// lax.fori_loop(0, 3, lambda k, c: tanh(c @ w), x) then lax.switch(i, [a + 1, a * x]) as jax.export
// prints them (n symbolic). Each region becomes a private region function; the carried values keep
// their symbolic types; the loop's captured dimension variable (%arg0 = n) is re-materialized, not
// passed; the case's captures (the scalar 1.0, the loop result, x) are passed after the index.
// CHECK-LABEL: func.func @main(%arg0: !relax.tensor<[], i32>, %arg1: !relax.tensor<["n", 4], f32>, %arg2: !relax.tensor<[4, 4], f32>)
// CHECK:      %[[W:.*]]:4 = "relax_v.while"(%arg2, %[[Z:.*]], %[[Z]], %arg1) {body = @main_while1_body, carried = 4 : i64, cond = @main_while1_cond}
// CHECK-SAME:   -> (!relax.tensor<[4, 4], f32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>, !relax.tensor<["n", 4], f32>)
// CHECK:      %[[I:.*]] = "relax.minimum"
// CHECK:      %[[C:.*]] = "relax_v.case"(%[[I]], %{{.*}}, %[[W]]#3, %arg1) {branches = [@main_case2_branch0, @main_case2_branch1]}
// CHECK-SAME:   -> !relax.tensor<["n", 4], f32>
// CHECK:      return %[[C]]
// CHECK:      func.func private @main_while1_cond(%arg0: !relax.tensor<[4, 4], f32>, %arg1: !relax.tensor<[], i32>, %arg2: !relax.tensor<[], i32>, %arg3: !relax.tensor<["n", 4], f32>) -> !relax.tensor<[], i1>
// CHECK-SAME:   attributes {relax.region, relax.symbol_lower = {n = 1 : i64}}
// CHECK:        "relax.less"(%arg1,
// CHECK:      func.func private @main_while1_body(%arg0: !relax.tensor<[4, 4], f32>, %arg1: !relax.tensor<[], i32>, %arg2: !relax.tensor<[], i32>, %arg3: !relax.tensor<["n", 4], f32>)
// CHECK-SAME:   -> (!relax.tensor<[4, 4], f32>, !relax.tensor<[], i32>, !relax.tensor<[], i32>, !relax.tensor<["n", 4], f32>)
// CHECK:        %[[M:.*]] = "relax.matmul"(%arg3, %arg0)
// CHECK:        %[[T:.*]] = "relax.tanh"(%[[M]])
// CHECK:        return %arg0, %{{.*}}, %{{.*}}, %[[T]]
// CHECK:      func.func private @main_case2_branch0(%arg0: !relax.tensor<[], f32>, %arg1: !relax.tensor<["n", 4], f32>, %arg2: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
// CHECK:        "relax.broadcast_to"(%{{.*}}) {shape = ["n", 4]}
// CHECK:        "relax.add"(%arg1,
// CHECK:      func.func private @main_case2_branch1(
// CHECK:        "relax.multiply"(%arg1, %arg2)

module @jit_f attributes {jax.uses_shape_polymorphism = true, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<i32>, %arg1: tensor<?x4xf32>, %arg2: tensor<4x4xf32>) -> (tensor<?x4xf32> {jax.result_info = "result"}) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0 = stablehlo.get_dimension_size %arg1, dim = 0 : (tensor<?x4xf32>) -> tensor<i32>
    %1 = stablehlo.compare GE, %0, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.custom_call @shape_assertion(%1, %0) {api_version = 2 : i32, error_message = "shape assertion", has_side_effect = true} : (tensor<i1>, tensor<i32>) -> ()
    %2 = call @_wrapped_jax_export_main(%0, %arg0, %arg1, %arg2) : (tensor<i32>, tensor<i32>, tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
    return %2 : tensor<?x4xf32>
  }
  func.func private @_wrapped_jax_export_main(%arg0: tensor<i32> {jax.global_constant = "n"}, %arg1: tensor<i32>, %arg2: tensor<?x4xf32>, %arg3: tensor<4x4xf32>) -> (tensor<?x4xf32> {jax.result_info = "result"}) {
    %c = stablehlo.constant dense<4> : tensor<1xi32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %c_0 = stablehlo.constant dense<1> : tensor<i32>
    %c_1 = stablehlo.constant dense<3> : tensor<i32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %0:4 = stablehlo.while(%iterArg = %arg3, %iterArg_3 = %c_2, %iterArg_4 = %c_2, %iterArg_5 = %arg2) : tensor<4x4xf32>, tensor<i32>, tensor<i32>, tensor<?x4xf32>
    cond {
      %3 = stablehlo.compare LT, %iterArg_3, %c_1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %3 : tensor<i1>
    } do {
      %3:2 = func.call @closed_call(%arg0, %iterArg, %iterArg_4, %iterArg_5) : (tensor<i32>, tensor<4x4xf32>, tensor<i32>, tensor<?x4xf32>) -> (tensor<i32>, tensor<?x4xf32>)
      %4 = stablehlo.add %iterArg_3, %c_0 : tensor<i32>
      stablehlo.return %iterArg, %4, %3#0, %3#1 : tensor<4x4xf32>, tensor<i32>, tensor<i32>, tensor<?x4xf32>
    }
    %1 = stablehlo.clamp %c_2, %arg1, %c_0 : tensor<i32>
    %2 = "stablehlo.case"(%1) ({
      %3 = stablehlo.reshape %arg0 : (tensor<i32>) -> tensor<1xi32>
      %4 = stablehlo.concatenate %3, %c, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
      %5 = stablehlo.dynamic_broadcast_in_dim %cst, %4, dims = [] : (tensor<f32>, tensor<2xi32>) -> tensor<?x4xf32>
      %6 = stablehlo.add %0#3, %5 : tensor<?x4xf32>
      stablehlo.return %6 : tensor<?x4xf32>
    }, {
      %3 = stablehlo.multiply %0#3, %arg2 : tensor<?x4xf32>
      stablehlo.return %3 : tensor<?x4xf32>
    }) : (tensor<i32>) -> tensor<?x4xf32>
    return %2 : tensor<?x4xf32>
  }
  func.func private @closed_call(%arg0: tensor<i32> {jax.global_constant = "n"}, %arg1: tensor<4x4xf32>, %arg2: tensor<i32>, %arg3: tensor<?x4xf32>) -> (tensor<i32>, tensor<?x4xf32>) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0 = stablehlo.add %arg2, %c : tensor<i32>
    %1 = stablehlo.dot_general %arg3, %arg1, contracting_dims = [1] x [0] : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
    %2 = stablehlo.tanh %1 : tensor<?x4xf32>
    return %0, %2 : tensor<i32>, tensor<?x4xf32>
  }
}

