// Sharding annotations are dropped for a single-device compile (a logged warning, not an error);
// the annotations' identities disappear from the relax IR.
// RUN: relax-import-stablehlo %s 2>/dev/null | FileCheck %s
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[A:.*]]: !relax.tensor<[4, 2], f32>, %[[B:.*]]: !relax.tensor<[4, 2], f32>)
// CHECK: %[[R:.*]] = "relax.add"(%[[A]], %[[B]])
// CHECK-NEXT: return %[[R]]

module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=1]>
  func.func public @main(%arg0: tensor<4x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>},
                         %arg1: tensor<4x2xf32> {mhlo.sharding = "{replicated}"})
      -> (tensor<4x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
    %0 = sdy.sharding_constraint %arg0 <@mesh, [{"x"}, {}]> : tensor<4x2xf32>
    %1 = stablehlo.custom_call @Sharding(%arg1) {mhlo.sharding = "{devices=[2,1]<=[2]}"} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %2 = stablehlo.add %0, %1 : tensor<4x2xf32>
    return %2 : tensor<4x2xf32>
  }
}
