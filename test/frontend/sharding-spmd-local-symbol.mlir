// A dynamic dim split over the mesh whose name is not a multiple (here unnamed, jax would say b)
// gets its own local symbol, named after the dim and the mesh axis; the global dim is 2 times it,
// recorded for the run-time divisibility check (relax.arg_global_dims).
// RUN: relax-import-stablehlo --spmd %s | FileCheck %s
// CHECK: func.func @main(%arg0: !relax.tensor<["arg0_dim0_x", 3], f32>) -> !relax.tensor<["arg0_dim0_x", 3], f32>
// CHECK-SAME: relax.arg_global_dims = {{\[\["2\*arg0_dim0_x", "3"\]\]}}
// CHECK-SAME: relax.symbol_lower = {arg0_dim0_x = 1 : i64}
// CHECK: "relax.negative"(%arg0)

module @m attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2]>
  func.func public @main(%arg0: tensor<?x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<?x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
    %0 = stablehlo.negate %arg0 : tensor<?x3xf32>
    return %0 : tensor<?x3xf32>
  }
}
