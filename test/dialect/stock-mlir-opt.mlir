// The committed IRDL file loads into stock mlir-opt, which then parses a relax program.
// RUN: mlir-opt --irdl-file=%relax_irdl %s | FileCheck %s

// CHECK-LABEL: func.func @mlp
// CHECK: "relax.matmul"(%{{.*}}, %{{.*}}) : (!relax.tensor<["b", 64], f32>, !relax.tensor<[64, 32], f32>) -> !relax.tensor<["b", 32], f32>
// CHECK: "relax.relu"
func.func @mlp(%x: !relax.tensor<["b", 64], f32>, %w: !relax.tensor<[64, 32], f32>) -> !relax.tensor<["b", 32], f32> {
  %0 = "relax.matmul"(%x, %w) : (!relax.tensor<["b", 64], f32>, !relax.tensor<[64, 32], f32>) -> !relax.tensor<["b", 32], f32>
  %1 = "relax.relu"(%0) : (!relax.tensor<["b", 32], f32>) -> !relax.tensor<["b", 32], f32>
  return %1 : !relax.tensor<["b", 32], f32>
}
