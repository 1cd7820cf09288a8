// RUN: relax-import-stablehlo %s | FileCheck %s
// RUN: relax-import-stablehlo %s | relax-opt --pass-pipeline='builtin.module(relax-compile-cpu)' | FileCheck %s --check-prefix=ENTRY
// A complex argument or result of @main is its parts interleaved in one more dim of 2 (numpy's
// complex layout, so the runtime passes a view of the caller's complex array), marked
// relax.complex; inside, the parts are sliced out, and a complex result is built from them.

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %arg0: !relax.tensor<["d0", 4, 2], f32> {relax.complex}, %arg1: !relax.tensor<[4], f32>)
// CHECK-SAME: -> (!relax.tensor<["d0", 4, 2], f32> {relax.complex}, !relax.tensor<["d0", 4], f32>)
// CHECK: %[[RE:.*]] = "relax.strided_slice"(%arg0) {axes = [2], begin = [0], end = [1]}
// CHECK: %[[IM:.*]] = "relax.strided_slice"(%arg0) {axes = [2], begin = [1], end = [2]}
// CHECK: %[[Z:.*]] = "relax_v.concat"({{.*}}) {axis = 2 : i64} : ({{.*}}) -> !relax.tensor<["d0", 4, 2], f32>
// CHECK: return %[[Z]], %{{.*}} : !relax.tensor<["d0", 4, 2], f32>, !relax.tensor<["d0", 4], f32>

// The entry keeps the marks for the runtime.
// ENTRY: func.func @main(
// ENTRY-SAME: relax.arg_attrs = [{relax.complex}, {}]
// ENTRY-SAME: relax.res_attrs = [{relax.complex}, {}]

func.func public @main(%arg0: tensor<?x4xcomplex<f32>>, %arg1: tensor<4xf32>) -> (tensor<?x4xcomplex<f32>>, tensor<?x4xf32>) {
  %0 = stablehlo.real %arg0 : (tensor<?x4xcomplex<f32>>) -> tensor<?x4xf32>
  %1 = stablehlo.imag %arg0 : (tensor<?x4xcomplex<f32>>) -> tensor<?x4xf32>
  %2 = stablehlo.complex %1, %0 : tensor<?x4xcomplex<f32>>
  %3 = stablehlo.multiply %arg0, %2 : tensor<?x4xcomplex<f32>>
  return %3, %0 : tensor<?x4xcomplex<f32>>, tensor<?x4xf32>
}
