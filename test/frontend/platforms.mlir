// A module jax exported for several platforms (jax.export(f, platforms=("cpu", "cuda"))): @main's
// first argument is the platform index, and the lowerings that differ sit in stablehlo.case ops on
// it. --platform-index K imports platform K's lowering: the index is a constant, @main loses that
// argument, and the cases fold to their chosen branches (the other platform's custom call is
// neither checked nor imported; platform 1's is, and refused here). Without it, or with an index no
// lowering has, a located error says what the argument is.
// RUN: relax-import-stablehlo --platform-index 0 %s | FileCheck %s --check-prefix=CPU
// RUN: not relax-import-stablehlo --platform-index 1 %s 2>&1 | FileCheck %s --check-prefix=GPU
// RUN: not relax-import-stablehlo %s 2>&1 | FileCheck %s --check-prefix=ERR
// RUN: not relax-import-stablehlo --platform-index 2 %s 2>&1 | FileCheck %s --check-prefix=ERR2
// CPU-LABEL: func.func @main
// CPU-SAME: (%[[X:[a-z0-9]+]]: !relax.tensor<["d0", 3], f32>) -> !relax.tensor<["d0", 3], f32>
// CPU-NOT: relax.case
// CPU: "relax.tanh"(%[[X]])
// CPU-NOT: relax.exp
// CPU-NOT: custom_call
// GPU: error: unsupported StableHLO op 'stablehlo.custom_call': call target @cusolver_only_on_gpu
// GPU-NOT: tanh
// ERR: platforms.mlir:[[@LINE+3]]:{{[0-9]+}}: error: unsupported StableHLO op 'func.func': @main's argument #0 is jax's platform index
// ERR2: platforms.mlir:[[@LINE+2]]:{{[0-9]+}}: error: unsupported StableHLO op 'func.func': platform_index 2 selects none of the 2 lowerings
module @jit_f {
  func.func public @main(%arg0: tensor<i32> {jax.global_constant = "_platform_index"}, %arg1: tensor<?x3xf32>) -> tensor<?x3xf32> {
    %0 = call @_wrapped(%arg0, %arg1) : (tensor<i32>, tensor<?x3xf32>) -> tensor<?x3xf32>
    return %0 : tensor<?x3xf32>
  }
  func.func private @_wrapped(%arg0: tensor<i32> {jax.global_constant = "_platform_index"}, %arg1: tensor<?x3xf32>) -> tensor<?x3xf32> {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %i = "stablehlo.case"(%arg0) ({
      stablehlo.return %c0 : tensor<i32>
    }, {
      stablehlo.return %c1 : tensor<i32>
    }) : (tensor<i32>) -> tensor<i32>
    %r = "stablehlo.case"(%i) ({
      %t = stablehlo.tanh %arg1 : tensor<?x3xf32>
      stablehlo.return %t : tensor<?x3xf32>
    }, {
      %e = stablehlo.exponential %arg1 : tensor<?x3xf32>
      %g = stablehlo.custom_call @cusolver_only_on_gpu(%e) : (tensor<?x3xf32>) -> tensor<?x3xf32>
      stablehlo.return %g : tensor<?x3xf32>
    }) : (tensor<i32>) -> tensor<?x3xf32>
    return %r : tensor<?x3xf32>
  }
}
