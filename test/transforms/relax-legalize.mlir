// RUN: relax-opt %s --relax-legalize | FileCheck %s
// RUN: relax-opt %s --relax-legalize=ops=relax.relu | FileCheck %s --check-prefix=PARTIAL

// Graph ops become call_tir with their symbolic result types; identical kernels are shared.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: !relax.tensor<["n", 64], f32>, %[[W:.*]]: !relax.tensor<[64, 32], f32>
// CHECK: %[[M:.*]] = "relax_v.call_tir"(%[[X]], %[[W]]) {callee = @matmul} : (!relax.tensor<["n", 64], f32>, !relax.tensor<[64, 32], f32>) -> !relax.tensor<["n", 32], f32>
// CHECK: %[[R1:.*]] = "relax_v.call_tir"(%[[M]]) {callee = @relu} : {{.*}} -> !relax.tensor<["n", 32], f32>
// CHECK: %[[R2:.*]] = "relax_v.call_tir"(%[[R1]]) {callee = @relu} : {{.*}} -> !relax.tensor<["n", 32], f32>
// CHECK-NOT: "relax.relu"
// CHECK: func.func private @matmul(%{{.*}}: tensor<?x64xf32>, %{{.*}}: tensor<64x32xf32>, %{{.*}}: tensor<?x32xf32>) -> tensor<?x32xf32>
// CHECK: linalg.matmul
// CHECK: func.func private @relu(
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
// CHECK: arith.maximumf
// CHECK-NOT: func.func private @relu_1

// PARTIAL: "relax.matmul"
// PARTIAL: "relax_v.call_tir"{{.*}}callee = @relu
func.func @main(%x: !relax.tensor<["n", 64], f32>, %w: !relax.tensor<[64, 32], f32>) -> !relax.tensor<["?", "?"], f32> {
  %0 = "relax.matmul"(%x, %w) : (!relax.tensor<["n", 64], f32>, !relax.tensor<[64, 32], f32>) -> !relax.tensor<["?", "?"], f32>
  %1 = "relax.relu"(%0) : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  %2 = "relax.relu"(%1) : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  return %2 : !relax.tensor<["?", "?"], f32>
}
