// stablehlo.composite is imported by inlining its decomposition function.
// RUN: relax-import-stablehlo %s | FileCheck %s
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: !relax.tensor<[4], f32>)
// CHECK: %[[C:.*]] = "relax.constant"() {value = dense<2.000000e+00> : tensor<4xf32>}
// CHECK: %[[S:.*]] = "relax.sin"(%[[X]])
// CHECK: %[[R:.*]] = "relax.multiply"(%[[S]], %[[C]])
// CHECK-NOT: composite
// CHECK: return %[[R]]

func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.composite "my.sin2" %arg0 {decomposition = @my.sin2, composite_attributes = {scale = 2.0 : f32}} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @my.sin2(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %cst = stablehlo.constant dense<2.000000e+00> : tensor<4xf32>
  %0 = stablehlo.sine %arg0 : tensor<4xf32>
  %1 = stablehlo.multiply %0, %cst : tensor<4xf32>
  return %1 : tensor<4xf32>
}
