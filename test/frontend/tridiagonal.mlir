// jax's lax.linalg.tridiagonal_solve on the CPU (lapack_sgtsv_ffi) becomes relax_v.tridiagonal_solve
// (the factored diagonals, results 0-2, are never read by jax and are not computed); its kernel is
// gtsv's elimination: row k + 1 against row k, the two exchanged where |d[k]| >= |dl[k+1]| fails
// (a NaN compares false), then back substitution over the rows.
// RUN: relax-import-stablehlo %s | FileCheck %s --check-prefix=IMPORT
// RUN: relax-import-stablehlo %s | relax-opt --relax-infer-shapes --relax-legalize | FileCheck %s --check-prefix=KERNEL
// IMPORT-LABEL: func.func @main
// IMPORT: %[[X:.*]]:2 = "relax_v.tridiagonal_solve"(%arg0, %arg1, %arg2, %arg3) : {{.*}} -> (!relax.tensor<[5, 3], f32>, !relax.tensor<[], i32>)
// IMPORT: "relax.not_equal"(%[[X]]#1
// IMPORT: "relax.where"({{.*}}, %[[X]]#0)
// IMPORT-NOT: relax_v.unavailable
// KERNEL: "relax_v.call_tir"(%arg0, %arg1, %arg2, %arg3) {callee = @gtsv}
// KERNEL: func.func private @gtsv({{.*}}) -> (tensor<5x3xf32>, tensor<i32>)
// KERNEL: scf.for %{{.*}} = %c0 to %[[M1:.*]] step %c1 iter_args({{.*}}) -> (tensor<5x3xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, i32)
// KERNEL: arith.cmpf oge
// KERNEL: scf.for %{{.*}} = %c0 to %c3
// KERNEL: scf.if
// KERNEL: scf.for %{{.*}} = %c0 to %c3
// KERNEL-NEXT: scf.for %{{.*}} = %c0 to %c5
// KERNEL: arith.divf
func.func @main(%dl: tensor<5xf32>, %d: tensor<5xf32>, %du: tensor<5xf32>, %b: tensor<5x3xf32>) -> tensor<5x3xf32> {
  %0:5 = stablehlo.custom_call @lapack_sgtsv_ffi(%dl, %d, %du, %b) {operand_layouts = [dense<0> : tensor<1xindex>, dense<0> : tensor<1xindex>, dense<0> : tensor<1xindex>, dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<0> : tensor<1xindex>, dense<0> : tensor<1xindex>, dense<0> : tensor<1xindex>, dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]} : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5x3xf32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5x3xf32>, tensor<i32>)
  %c = stablehlo.constant dense<0> : tensor<i32>
  %1 = stablehlo.compare NE, %0#4, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
  %2 = stablehlo.broadcast_in_dim %1, dims = [] : (tensor<i1>) -> tensor<5x3xi1>
  %nan = stablehlo.constant dense<0x7FC00000> : tensor<5x3xf32>
  %3 = stablehlo.select %2, %nan, %0#3 : tensor<5x3xi1>, tensor<5x3xf32>
  return %3 : tensor<5x3xf32>
}
