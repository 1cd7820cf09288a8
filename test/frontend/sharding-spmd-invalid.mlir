// An SPMD import refuses, with a located error, a dynamic dim split over the mesh without a name
// that makes its local size a symbol (jax exports such a dim as 2*k, whose local size is k).
// RUN: not relax-import-stablehlo --spmd %s 2>&1 | FileCheck %s
// CHECK: sharding-spmd-invalid.mlir:[[# @LINE + 4]]:3: error: unsupported StableHLO op 'func.func': argument #0 dim 0 (?) is split 2 ways over ['x']: give it as a multiple of 2 (for example 2*k) so that its local size is a symbol

module @m attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2]>
  func.func public @main(%arg0: tensor<?x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> (tensor<?x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
    %0 = stablehlo.negate %arg0 : tensor<?x3xf32>
    return %0 : tensor<?x3xf32>
  }
}
