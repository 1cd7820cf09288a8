// jax.jit(f, donate_argnums=...) marks a donated argument `tf.aliasing_output = <result>`: the
// importer keeps it as `relax.donate` on the relax parameter (the runtime writes that result into
// the argument's buffer). `jax.buffer_donor` (donated, no result to alias) is dropped.
// RUN: relax-import-stablehlo %s | FileCheck %s
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[C:[a-z0-9]+]]: !relax.tensor<[2, "d0", 4], f32> {relax.donate = 0 : i64}, %[[U:[a-z0-9]+]]: !relax.tensor<[2, 1, 4], f32>, %[[P:[a-z0-9]+]]: !relax.tensor<[], i32>, %[[B:[a-z0-9]+]]: !relax.tensor<[3], f32>)
// CHECK-SAME: -> (!relax.tensor<[2, "d0", 4], f32>, !relax.tensor<[3], f32>)
// CHECK-NOT: buffer_donor
// CHECK: %[[R:.*]] = "relax.dynamic_update_slice"(%[[C]], %[[U]],
// CHECK: return %[[R]], %{{.*}}
func.func public @main(%arg0: tensor<2x?x4xf32> {tf.aliasing_output = 0 : i32}, %arg1: tensor<2x1x4xf32>, %arg2: tensor<i32>, %arg3: tensor<3xf32> {jax.buffer_donor = true}) -> (tensor<2x?x4xf32>, tensor<3xf32>) {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0 = stablehlo.dynamic_update_slice %arg0, %arg1, %c, %arg2, %c : (tensor<2x?x4xf32>, tensor<2x1x4xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<2x?x4xf32>
  %1 = stablehlo.add %arg3, %arg3 : tensor<3xf32>
  return %0, %1 : tensor<2x?x4xf32>, tensor<3xf32>
}
