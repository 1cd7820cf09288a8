// The StableHLO collectives of a manual computation import as relax collective ops on local
// shapes (a 4x3 argument split over x=2 is 2x3 per device).
// RUN: relax-import-stablehlo --spmd %s | FileCheck %s
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: !relax.tensor<[2, 3], f32>) -> (!relax.tensor<[2, 3], f32>, !relax.tensor<[4, 3], f32>, !relax.tensor<[1, 3], f32>)
// CHECK: %[[B:.*]] = "relax.collective_broadcast"(%[[X]]) {group_size = 2 : i64, groups = [0, 1]} : (!relax.tensor<[2, 3], f32>) -> !relax.tensor<[2, 3], f32>
// CHECK: %[[G:.*]] = "relax.all_gather"(%[[X]]) {dim = 0 : i64, group_size = 2 : i64, groups = [0, 1]} : (!relax.tensor<[2, 3], f32>) -> !relax.tensor<[4, 3], f32>
// CHECK: %[[S:.*]] = "relax.reduce_scatter"(%[[X]]) {dim = 0 : i64, group_size = 2 : i64, groups = [0, 1], reduce = "max"} : (!relax.tensor<[2, 3], f32>) -> !relax.tensor<[1, 3], f32>
// CHECK: return %[[B]], %[[G]], %[[S]]

module @m attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2]>
  func.func public @main(%arg0: tensor<4x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<4x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, tensor<8x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, tensor<2x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
    %0:3 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>, <@mesh, [{"x"}, {}]>, <@mesh, [{"x"}, {}]>] manual_axes={"x"} (%a: tensor<2x3xf32>) {
      %1 = "stablehlo.collective_broadcast"(%a) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
      %2 = "stablehlo.all_gather"(%a) {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>, use_global_device_ids} : (tensor<2x3xf32>) -> tensor<4x3xf32>
      %3 = "stablehlo.reduce_scatter"(%a) ({
      ^bb0(%p: tensor<f32>, %q: tensor<f32>):
        %m = stablehlo.maximum %p, %q : tensor<f32>
        stablehlo.return %m : tensor<f32>
      }) {scatter_dimension = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>, use_global_device_ids} : (tensor<2x3xf32>) -> tensor<1x3xf32>
      sdy.return %1, %2, %3 : tensor<2x3xf32>, tensor<4x3xf32>, tensor<1x3xf32>
    } : (tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<8x3xf32>, tensor<2x3xf32>)
    return %0#0, %0#1, %0#2 : tensor<4x3xf32>, tensor<8x3xf32>, tensor<2x3xf32>
  }
}
