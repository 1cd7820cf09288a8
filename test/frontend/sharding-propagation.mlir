// A jax.jit program with NamedSharding in/out shardings (no shard_map): the per-device program
// comes from propagation. W1 column-split and the bias split: the first product and the bias add
// are local; relu's broadcast zero is rebuilt at the local shape; the second product contracts
// the split dim, so its partial sums are all-reduced.
// RUN: relax-import-stablehlo --spmd %s | FileCheck %s
// RUN: relax-import-stablehlo --spmd %s --split-collectives | FileCheck %s --check-prefix=SPLIT
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: !relax.tensor<[4, 6], f32>, %[[W1:.*]]: !relax.tensor<[6, 4], f32>, %[[W2:.*]]: !relax.tensor<[4, 6], f32>, %[[B:.*]]: !relax.tensor<[4], f32>) -> (!relax.tensor<[4, 6], f32>, !relax.tensor<[6], f32>)
// CHECK: %[[H:.*]] = "relax.matmul"(%[[X]], %[[W1]]) : {{.*}} -> !relax.tensor<[4, 4], f32>
// CHECK: "relax.add"(%[[H]], %{{.*}}) : (!relax.tensor<[4, 4], f32>, !relax.tensor<[4, 4], f32>)
// CHECK: "relax.broadcast_to"(%{{.*}}) {shape = [4, 4]}
// CHECK: %[[R:.*]] = "relax.maximum"
// CHECK: %[[P:.*]] = "relax.matmul"(%[[R]], %[[W2]]) : {{.*}} -> !relax.tensor<[4, 6], f32>
// CHECK: %[[S:.*]] = "relax.all_reduce"(%[[P]]) {group_size = 2 : i64, groups = [0, 1], reduce = "sum"}
// CHECK: %[[M:.*]] = "relax.max"(%[[X]])
// CHECK-NOT: relax.all_reduce
// CHECK: return %[[S]], %[[M]]
// SPLIT: func.func @main__s0
// SPLIT: func.func @main__s1

module @jit_f attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2]>
  func.func public @main(%arg0: tensor<4x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}, %arg1: tensor<6x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %arg2: tensor<8x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg3: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> (tensor<4x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}, tensor<6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
    %1 = stablehlo.broadcast_in_dim %arg3, dims = [1] : (tensor<8xf32>) -> tensor<1x8xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x8xf32>) -> tensor<4x8xf32>
    %3 = stablehlo.add %0, %2 : tensor<4x8xf32>
    %4 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
    %5 = stablehlo.maximum %3, %4 : tensor<4x8xf32>
    %6 = stablehlo.dot_general %5, %arg2, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
    %7 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.maximum across dimensions = [0] : (tensor<4x6xf32>, tensor<f32>) -> tensor<6xf32>
    return %6, %7 : tensor<4x6xf32>, tensor<6xf32>
  }
}
