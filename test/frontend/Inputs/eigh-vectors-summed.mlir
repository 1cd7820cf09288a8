// Input of eigh-vectors.mlir: the eigenvectors summed over their index (the result depends on
// their signs).
func.func @main(%arg0: tensor<3x3xf32>) -> tensor<3xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %v:3 = stablehlo.custom_call @lapack_ssyevd_ffi(%arg0) {mhlo.backend_config = {mode = 86 : ui8, uplo = 76 : ui8}} : (tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3xf32>, tensor<i32>) loc(#a)
  %s = stablehlo.reduce(%v#0 init: %z) applies stablehlo.add across dimensions = [1] : (tensor<3x3xf32>, tensor<f32>) -> tensor<3xf32> loc(#b)
  return %s : tensor<3xf32>
}
#a = loc("eigh-vectors-summed.mlir":5:10)
#b = loc("eigh-vectors-summed.mlir":6:8)
