// The StableHLO ops cholesky and triangular_solve (jax's TPU lowering of jnp.linalg) become
// relax_v.cholesky (a factor that is not positive definite is all NaN) and relax.triangular_solve;
// a right-side solve is the left-side solve of the transposes.
// RUN: relax-import-stablehlo %s | FileCheck %s
// CHECK-LABEL: func.func @main
// CHECK: %[[F:.*]]:2 = "relax_v.cholesky"(%arg0)
// CHECK: "relax.not_equal"(%[[F]]#1
// CHECK: "relax.where"({{.*}}, %[[F]]#0)
// CHECK: "relax.triangular_solve"(%arg0, %arg1) {lower = 1 : i64, transpose_a = 1 : i64, unit_diagonal = 0 : i64}
// CHECK: %[[BT:.*]] = "relax.permute_dims"(%arg2) {axes = [1, 0]}
// CHECK: %[[XT:.*]] = "relax.triangular_solve"(%arg0, %[[BT]]) {lower = 0 : i64, transpose_a = 1 : i64, unit_diagonal = 1 : i64}
// CHECK: "relax.permute_dims"(%[[XT]]) {axes = [1, 0]}
func.func @main(%a: tensor<4x4xf32>, %b: tensor<4x2xf32>, %c: tensor<3x4xf32>) -> (tensor<4x4xf32>, tensor<4x2xf32>, tensor<3x4xf32>) {
  %0 = "stablehlo.cholesky"(%a) {lower = true} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = "stablehlo.triangular_solve"(%a, %b) {left_side = true, lower = true, unit_diagonal = false, transpose_a = #stablehlo<transpose TRANSPOSE>} : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %2 = "stablehlo.triangular_solve"(%a, %c) {left_side = false, lower = false, unit_diagonal = true, transpose_a = #stablehlo<transpose NO_TRANSPOSE>} : (tensor<4x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return %0, %1, %2 : tensor<4x4xf32>, tensor<4x2xf32>, tensor<3x4xf32>
}
