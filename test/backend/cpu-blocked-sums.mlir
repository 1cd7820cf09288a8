// RUN: relax-opt %s --relax-legalize --relax-lower-shapes --relax-to-upstream --relax-cpu-vectorize | FileCheck %s

// A float sum over a long dim is added up in blocks of 32 iterations, three levels deep: each
// block starts from -0.0 (IEEE addition's identity) and its sum is added to the enclosing total.
// The innermost loop is the vectorized body as it was (one row of 3 lanes per iteration).
// CHECK-LABEL: func.func private @sum
// CHECK-DAG:   %[[C32768:.*]] = arith.constant 32768 : index
// CHECK-DAG:   %[[C1024:.*]] = arith.constant 1024 : index
// CHECK-DAG:   %[[C32:.*]] = arith.constant 32 : index
// CHECK-DAG:   %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<3xf32>
// CHECK-DAG:   %[[N:.*]] = tensor.dim
// CHECK:       scf.for %[[I0:.*]] = %{{.*}} to %[[N]] step %[[C32768]] iter_args(%[[T0:.*]] = %[[ZERO]])
// CHECK:         arith.minsi
// CHECK:         %[[NEG:.*]] = arith.constant dense<-0.000000e+00> : vector<3xf32>
// CHECK:         %[[B1:.*]] = scf.for {{.*}} step %[[C1024]] iter_args(%{{.*}} = %[[NEG]]) -> (vector<3xf32>)
// CHECK:           scf.for {{.*}} step %[[C32]] iter_args
// CHECK:             scf.for {{.*}} step %{{.*}} iter_args(%[[A:.*]] = %{{.*}}) -> (vector<3xf32>)
// CHECK:               vector.transfer_read
// CHECK:               arith.addf %[[A]]
// CHECK:         arith.addf %[[T0]], %[[B1]] : vector<3xf32>
// CHECK-NOT:   scf.for
// CHECK:       return
func.func @main(%x: !relax.tensor<["n", 3], f32>) -> !relax.tensor<[3], f32> {
  %s = "relax.sum"(%x) {axes = [0], keepdims = false} : (!relax.tensor<["n", 3], f32>) -> !relax.tensor<[3], f32>
  return %s : !relax.tensor<[3], f32>
}

// A short static sum stays one loop.
// CHECK-LABEL: func.func private @sum_{{[0-9]+}}(%arg0: tensor<8x3xf32>
// CHECK-NOT:   arith.minsi
// CHECK:       return
func.func @short(%x: !relax.tensor<[8, 3], f32>) -> !relax.tensor<[3], f32> {
  %s = "relax.sum"(%x) {axes = [0], keepdims = false} : (!relax.tensor<[8, 3], f32>) -> !relax.tensor<[3], f32>
  return %s : !relax.tensor<[3], f32>
}
