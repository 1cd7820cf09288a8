// RUN: relax-opt %s --relax-expand-attention | FileCheck %s

// relax.attention back to its unfused chain (what the GPU targets compile): scores, the scale,
// the causal where-mask from two aranges, max-subtracted softmax on the last axis, product with v.
// CHECK-LABEL: func.func @causal
// CHECK-SAME: (%[[Q:.*]]: !relax.tensor<[2, "n", 32], f32>, %[[K:.*]]: !relax.tensor<[2, "n", 32], f32>, %[[V:.*]]: !relax.tensor<[2, "n", 64], f32>)
// CHECK-NOT: "relax.attention"
// CHECK: %[[KT:.*]] = "relax.permute_dims"(%[[K]]) {axes = [0, 2, 1]}
// CHECK: %[[S:.*]] = "relax.matmul"(%[[Q]], %[[KT]]) : {{.*}} -> !relax.tensor<[2, "n", "n"], f32>
// CHECK: %[[C:.*]] = "relax.constant"() {value = dense<4.000000e+00> : tensor<f32>}
// CHECK: %[[SD:.*]] = "relax.divide"(%[[S]], %[[C]])
// CHECK: %[[R:.*]] = "relax.arange"() {dtype = i64, end = "n"}
// CHECK: %[[RR:.*]] = "relax.reshape"(%[[R]]) {shape = ["n", 1]}
// CHECK: %[[CO:.*]] = "relax.arange"() {dtype = i64, end = "n"}
// CHECK: %[[M:.*]] = "relax.greater_equal"(%[[RR]], %[[CO]])
// CHECK: %[[F:.*]] = "relax.constant"() {value = dense<-1.000000e+09> : tensor<f32>}
// CHECK: %[[X:.*]] = "relax.where"(%[[M]], %[[SD]], %[[F]])
// CHECK: %[[MX:.*]] = "relax.max"(%[[X]]) {axes = [2], keepdims = true}
// CHECK: %[[D:.*]] = "relax.subtract"(%[[X]], %[[MX]])
// CHECK: %[[E:.*]] = "relax.exp"(%[[D]])
// CHECK: %[[SM:.*]] = "relax.sum"(%[[E]]) {axes = [2], keepdims = true}
// CHECK: %[[P:.*]] = "relax.divide"(%[[E]], %[[SM]])
// CHECK: %[[O:.*]] = "relax.matmul"(%[[P]], %[[V]]) : {{.*}} -> !relax.tensor<[2, "n", 64], f32>
// CHECK: return %[[O]]
func.func @causal(%q: !relax.tensor<[2, "n", 32], f32>, %k: !relax.tensor<[2, "n", 32], f32>, %v: !relax.tensor<[2, "n", 64], f32>) -> !relax.tensor<[2, "n", 64], f32> {
  %r = "relax.attention"(%q, %k, %v) {divisor = 4.0 : f32, mask = "causal", fill = -1.0e9 : f32} : (!relax.tensor<[2, "n", 32], f32>, !relax.tensor<[2, "n", 32], f32>, !relax.tensor<[2, "n", 64], f32>) -> !relax.tensor<[2, "n", 64], f32>
  return %r : !relax.tensor<[2, "n", 64], f32>
}
