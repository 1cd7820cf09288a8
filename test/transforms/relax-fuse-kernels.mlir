// RUN: relax-opt %s --split-input-file --relax-legalize --relax-fuse-kernels | FileCheck %s

// An add -> relu -> exp chain (and a broadcast bias add after it) becomes one call_tir of one
// kernel holding one linalg.generic; the unfused kernels are gone.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%[[X:.*]]: !relax.tensor<["n", 32], f32>, %[[Y:.*]]: !relax.tensor<["n", 32], f32>, %[[B:.*]]: !relax.tensor<[32], f32>) -> !relax.tensor<["n", 32], f32>
// CHECK-NEXT: %[[R:.*]] = "relax_v.call_tir"(%[[X]], %[[Y]], %[[B]]) {callee = @[[K:.*]]} : (!relax.tensor<["n", 32], f32>, !relax.tensor<["n", 32], f32>, !relax.tensor<[32], f32>) -> !relax.tensor<["n", 32], f32>
// CHECK-NOT: "relax_v.call_tir"
// CHECK-NEXT: return %[[R]] : !relax.tensor<["n", 32], f32>
// CHECK: func.func private @[[K]](%{{.*}}: tensor<?x32xf32>, %{{.*}}: tensor<?x32xf32>, %{{.*}}: tensor<32xf32>, %[[OUT:.*]]: tensor<?x32xf32>) -> tensor<?x32xf32>
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
// CHECK-SAME: outs(%[[OUT]] : tensor<?x32xf32>)
// CHECK: arith.addf
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: arith.addf
// CHECK-NOT: linalg.generic
// CHECK: return
// CHECK-NOT: func.func private @relu
// CHECK-NOT: func.func private @exp
func.func @chain(%x: !relax.tensor<["n", 32], f32>, %y: !relax.tensor<["n", 32], f32>, %b: !relax.tensor<[32], f32>) -> !relax.tensor<["?", "?"], f32> {
  %0 = "relax.add"(%x, %y) : (!relax.tensor<["n", 32], f32>, !relax.tensor<["n", 32], f32>) -> !relax.tensor<["?", "?"], f32>
  %1 = "relax.relu"(%0) : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  %2 = "relax.exp"(%1) : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  %3 = "relax.add"(%2, %b) : (!relax.tensor<["?", "?"], f32>, !relax.tensor<[32], f32>) -> !relax.tensor<["?", "?"], f32>
  return %3 : !relax.tensor<["?", "?"], f32>
}

// -----

// Not fused: a matmul producer (its epilogue would cost the matmul its fast schedule) and an
// intermediate that the consumer broadcasts (exp's [32] into ["n", 32]). A cheap producer with a
// second use (relu, also returned) is recomputed inside the consumer (XLA-style duplication).
// CHECK-LABEL: func.func @nofuse
// CHECK-SAME: (%[[X:.*]]: !relax.tensor<["n", 64], f32>, %[[W:.*]]: !relax.tensor<[64, 32], f32>, %[[V:.*]]: !relax.tensor<[32], f32>, %[[Z:.*]]: !relax.tensor<["n", 32], f32>) -> (!relax.tensor<["n", 32], f32>, !relax.tensor<["n", 32], f32>)
// CHECK-NEXT: %[[M:.*]] = "relax_v.call_tir"(%[[X]], %[[W]]) {callee = @matmul}
// CHECK-NEXT: %[[R:.*]] = "relax_v.call_tir"(%[[M]]) {callee = @relu}
// CHECK-NEXT: %[[E:.*]] = "relax_v.call_tir"(%[[V]]) {callee = @exp}
// CHECK-NEXT: %[[S:.*]] = "relax_v.call_tir"(%[[Z]], %[[E]], %[[M]]) {callee = @fused_add_relu_relu_add_multiply}
// CHECK-NEXT: return %[[R]], %[[S]] : !relax.tensor<["n", 32], f32>, !relax.tensor<["n", 32], f32>
// CHECK: func.func private @matmul(
// CHECK-NEXT: arith.constant
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: linalg.matmul
// CHECK-NEXT: return
func.func @nofuse(%x: !relax.tensor<["n", 64], f32>, %w: !relax.tensor<[64, 32], f32>, %v: !relax.tensor<[32], f32>, %z: !relax.tensor<["n", 32], f32>) -> (!relax.tensor<["?", "?"], f32>, !relax.tensor<["?", "?"], f32>) {
  %0 = "relax.matmul"(%x, %w) : (!relax.tensor<["n", 64], f32>, !relax.tensor<[64, 32], f32>) -> !relax.tensor<["?", "?"], f32>
  %1 = "relax.relu"(%0) : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  %2 = "relax.add"(%1, %1) : (!relax.tensor<["?", "?"], f32>, !relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  %3 = "relax.exp"(%v) : (!relax.tensor<[32], f32>) -> !relax.tensor<["?"], f32>
  %4 = "relax.add"(%z, %3) : (!relax.tensor<["n", 32], f32>, !relax.tensor<["?"], f32>) -> !relax.tensor<["?", "?"], f32>
  %5 = "relax.multiply"(%2, %4) : (!relax.tensor<["?", "?"], f32>, !relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  return %1, %5 : !relax.tensor<["?", "?"], f32>, !relax.tensor<["?", "?"], f32>
}
