// A shard_map program (tensor-parallel MLP, as jax.export prints it) imports as its per-device
// program: local shard shapes, the psum a relax.all_reduce, the mesh and shardings recorded;
// --split-collectives cuts @main at the collective.
// RUN: relax-import-stablehlo --spmd %s | FileCheck %s
// RUN: relax-import-stablehlo --split-collectives %s | FileCheck %s --check-prefix=SPLIT
// RUN: not relax-import-stablehlo %s 2>&1 | FileCheck %s --check-prefix=ONE
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: !relax.tensor<["b", 8], f32>, %[[W1:.*]]: !relax.tensor<[8, 8], f32>, %[[W2:.*]]: !relax.tensor<[8, 8], f32>) -> !relax.tensor<["b", 8], f32>
// CHECK-SAME: relax.arg_shardings = {{\[\[\[\], \[\]\], \[\[\], \["x"\]\], \[\["x"\], \[\]\]\]}}
// CHECK-SAME: relax.mesh_axes = ["x"], relax.mesh_shape = [2]
// CHECK: %[[H:.*]] = "relax.matmul"(%[[X]], %[[W1]])
// CHECK: %[[P:.*]] = "relax.matmul"(%{{.*}}, %[[W2]])
// CHECK: %[[R:.*]] = "relax.all_reduce"(%[[P]]) {group_size = 2 : i64, groups = [0, 1], reduce = "sum"} : (!relax.tensor<["b", 8], f32>) -> !relax.tensor<["b", 8], f32>
// CHECK: return %[[R]]
// SPLIT-NOT: func.func @main(
// SPLIT: func.func @main__s0(%{{.*}}: !relax.tensor<["b", 8], f32>, %{{.*}}: !relax.tensor<[8, 8], f32>, %{{.*}}: !relax.tensor<[8, 8], f32>) -> !relax.tensor<["b", 8], f32>
// SPLIT-NOT: relax.all_reduce
// ONE: error: {{.*}}shard_map (sdy.manual_computation, per-device code) is not supported

module @jit_mlp attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2]>
  func.func public @main(%arg0: tensor<?x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}, %arg1: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %arg2: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<?x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
    %0 = stablehlo.get_dimension_size %arg0, dim = 0 : (tensor<?x8xf32>) -> tensor<i32>
    %1 = call @_wrapped(%0, %arg0, %arg1, %arg2) : (tensor<i32>, tensor<?x8xf32>, tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    return %1 : tensor<?x8xf32>
  }
  func.func private @_wrapped(%arg0: tensor<i32> {jax.global_constant = "b"}, %arg1: tensor<?x8xf32>, %arg2: tensor<8x16xf32>, %arg3: tensor<16x8xf32>) -> tensor<?x8xf32> {
    %0 = sdy.manual_computation(%arg0, %arg1, %arg2, %arg3) in_shardings=[<@mesh, []>, <@mesh, [{}, {}]>, <@mesh, [{}, {"x"}]>, <@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{}, {}]>] manual_axes={"x"} (%arg4: tensor<i32>, %arg5: tensor<?x8xf32>, %arg6: tensor<8x8xf32>, %arg7: tensor<8x8xf32>) {
      %c = stablehlo.constant dense<8> : tensor<1xi32>
      %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %1 = stablehlo.dot_general %arg5, %arg6, contracting_dims = [1] x [0] : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
      %2 = stablehlo.reshape %arg4 : (tensor<i32>) -> tensor<1xi32>
      %3 = stablehlo.concatenate %2, %c, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
      %4 = stablehlo.dynamic_broadcast_in_dim %cst, %3, dims = [] : (tensor<f32>, tensor<2xi32>) -> tensor<?x8xf32>
      %5 = stablehlo.maximum %1, %4 : tensor<?x8xf32>
      %6 = stablehlo.dot_general %5, %arg7, contracting_dims = [1] x [0] : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
      %7 = "stablehlo.all_reduce"(%6) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 0>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %8 = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %8 : tensor<f32>
      }) : (tensor<?x8xf32>) -> tensor<?x8xf32>
      sdy.return %7 : tensor<?x8xf32>
    } : (tensor<i32>, tensor<?x8xf32>, tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    return %0 : tensor<?x8xf32>
  }
}
