// RUN: relax-import-stablehlo %s | FileCheck %s
// lax.top_k reaches the importer as the composite chlo.top_k: a stable sort descending in IEEE total
// order (its decomposition's TOTALORDER GT comparator) with the positions, then a slice of k.
// stablehlo.reverse (jnp.sort(descending=True)) is a take of reversed positions. The decomposition
// below is a stand-in: chlo.top_k is imported by its name, not through its decomposition.

// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: !relax.tensor<[4, 8], f32>)
// CHECK: %[[SO:.*]]:2 = "relax_v.sort"(%[[X]], %{{.*}}) {axis = 1 : i64, descending = [1], num_keys = 1 : i64, total_order = [1]}
// CHECK-DAG: %[[V:.*]] = "relax.strided_slice"(%[[SO]]#0) {axes = [1], begin = [0], end = [3], strides = [1]}
// CHECK-DAG: %[[I:.*]] = "relax.strided_slice"(%[[SO]]#1) {axes = [1], begin = [0], end = [3], strides = [1]}
// CHECK: %[[REV:.*]] = "relax.reverse"(%[[X]]) {dimensions = [1]}
// CHECK: return %[[V]], %[[I]], %[[REV]]

module @jit_f attributes {jax.uses_shape_polymorphism = true} {
  func.func public @main(%arg0: tensor<4x8xf32>) -> (tensor<4x3xf32>, tensor<4x3xi32>, tensor<4x8xf32>) {
    %0:2 = stablehlo.composite "chlo.top_k" %arg0 {composite_attributes = {k = 3 : i64}, decomposition = @chlo.top_k.impl, version = 1 : i32} : (tensor<4x8xf32>) -> (tensor<4x3xf32>, tensor<4x3xi32>)
    %1 = stablehlo.reverse %arg0, dims = [1] : tensor<4x8xf32>
    return %0#0, %0#1, %1 : tensor<4x3xf32>, tensor<4x3xi32>, tensor<4x8xf32>
  }
  func.func private @chlo.top_k.impl(%arg0: tensor<4x8xf32>) -> (tensor<4x3xf32>, tensor<4x3xi32>) {
    %c = stablehlo.constant dense<0.0> : tensor<4x3xf32>
    %i = stablehlo.constant dense<0> : tensor<4x3xi32>
    return %c, %i : tensor<4x3xf32>, tensor<4x3xi32>
  }
}
