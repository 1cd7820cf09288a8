// Input of eigh-vectors.mlir: the eigenvectors returned.
func.func @main(%arg0: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %v:3 = stablehlo.custom_call @lapack_ssyevd_ffi(%arg0) {mhlo.backend_config = {mode = 86 : ui8, uplo = 76 : ui8}} : (tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3xf32>, tensor<i32>) loc(#a)
  return %v#0 : tensor<3x3xf32>
} loc(#a)
#a = loc("eigh-vectors-returned.mlir":5:10)
