// jax's "rbg" PRNG: stablehlo.rng_bit_generator as XLA's CPU backend computes it (Philox-4x32-10,
// frontend/stablehlo/random.py): ceil(13 / 4) = 4 counter blocks, 10 rounds of two 32 x 32-bit
// products, the 16 words cut to 13; the new state's counter advanced by the blocks.
// RUN: relax-import-stablehlo %s | FileCheck %s
// RUN: relax-import-stablehlo %s | FileCheck %s --check-prefix=CONST
// RUN: relax-import-stablehlo %s | relax-opt --relax-infer-shapes --relax-legalize --relax-to-upstream | FileCheck %s --check-prefix=LOWER

// CHECK-LABEL: func.func @main(%arg0: !relax.tensor<[2], ui64>) -> (!relax.tensor<[2], ui64>, !relax.tensor<[13], ui32>)
// CHECK: "relax.bitcast"(%arg0) {dtype = i64}
// CHECK: "relax.arange"() {dtype = i64, end = 4 : i64}
// CHECK-COUNT-20: "relax.multiply"
// CHECK: "relax_v.concat"({{.*}}) {axis = 1 : i64} : ({{.*}}) -> !relax.tensor<[4, 4], i64>
// CHECK: "relax.strided_slice"({{.*}}) {axes = [0], begin = [0], end = [13], strides = [1]}
// CHECK: "relax.astype"({{.*}}) {dtype = i32}
// CHECK: "relax.bitcast"({{.*}}) {dtype = ui32}
// CHECK: "relax.arange"() {dtype = i64, end = 5 : i64, start = 4 : i64}
// CHECK: return
// Philox's multipliers, each once
// CONST-COUNT-1: "relax.constant"() {value = dense<3528531795> : tensor<i64>}
// CONST-NOT: dense<3528531795>
// CONST-COUNT-1: "relax.constant"() {value = dense<3449720151> : tensor<i64>}
// CONST-NOT: dense<3449720151>
// LOWER-NOT: "relax.multiply"
// LOWER: arith.muli
func.func @main(%s: tensor<2xui64>) -> (tensor<2xui64>, tensor<13xui32>) {
  %0, %1 = "stablehlo.rng_bit_generator"(%s) {rng_algorithm = #stablehlo<rng_algorithm DEFAULT>}
      : (tensor<2xui64>) -> (tensor<2xui64>, tensor<13xui32>)
  return %0, %1 : tensor<2xui64>, tensor<13xui32>
}
