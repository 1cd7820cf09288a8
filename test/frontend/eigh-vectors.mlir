// jax's eigh (lapack_ssyevd_ffi) whose eigenvectors are used: V diag(w) V^T, where their signs
// cancel, imports to relax_v.eigvalsh with vectors = 1 (the Jacobi rotations accumulated), the
// vectors sorted with their values. Unused vectors: the values-only kernel. Vectors returned: an
// error at the return naming the decomposition's line; a sum over them: refused where used.
// RUN: relax-import-stablehlo --split-input-file %s | FileCheck %s
// RUN: not relax-import-stablehlo %S/Inputs/eigh-vectors-returned.mlir 2>&1 | FileCheck %s --check-prefix=RET
// RUN: not relax-import-stablehlo %S/Inputs/eigh-vectors-summed.mlir 2>&1 | FileCheck %s --check-prefix=SUM
// CHECK-LABEL: func.func @main
// CHECK: %[[E:.*]]:3 = "relax_v.eigvalsh"(%{{.*}}) {vectors = 1 : i64}
// CHECK: %{{.*}}:2 = "relax_v.sort"(%{{.*}}, %[[E]]#2) {axis = 1 : i64, descending = [0], num_keys = 1 : i64, total_order = [0]}
// CHECK: "relax_v.sort"(%[[E]]#1)
// CHECK: relax.matmul
// RET: eigh-vectors-returned.mlir:5:10: error: the eigenvectors of jnp.linalg.eigh are returned (result #0)
// SUM: eigh-vectors-summed.mlir:{{.*}}: error: 'relax_v.unavailable' op the eigenvectors of jnp.linalg.eigh (computed at {{.*}}eigh-vectors-summed.mlir:5:10) reach 'stablehlo.reduce' here, which depends on their signs
func.func @main(%arg0: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %v:3 = stablehlo.custom_call @lapack_ssyevd_ffi(%arg0) {mhlo.backend_config = {mode = 86 : ui8, uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>]} : (tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3xf32>, tensor<i32>)
  %1 = stablehlo.broadcast_in_dim %v#1, dims = [1] : (tensor<3xf32>) -> tensor<3x3xf32>
  %2 = stablehlo.multiply %v#0, %1 : tensor<3x3xf32>
  %3 = stablehlo.transpose %v#0, dims = [1, 0] : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %4 = stablehlo.dot_general %2, %3, contracting_dims = [1] x [0] : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
  return %4 : tensor<3x3xf32>
}

// -----

// Only the values used: the values-only kernel.
// CHECK-LABEL: func.func @main
// CHECK: "relax_v.eigvalsh"(%arg0) :
// CHECK-NOT: vectors
// CHECK: return
func.func @main(%arg0: tensor<3x3xf32>) -> tensor<3xf32> {
  %v:3 = stablehlo.custom_call @lapack_ssyevd_ffi(%arg0) {mhlo.backend_config = {mode = 86 : ui8, uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>]} : (tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3xf32>, tensor<i32>)
  return %v#1 : tensor<3xf32>
}
