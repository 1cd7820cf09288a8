// an unsupported element type and an unsupported op (import-element-types.mlir)
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xf8E4M3FN>
  %1 = stablehlo.after_all : !stablehlo.token
  return %arg0 : tensor<4xf32>
}
