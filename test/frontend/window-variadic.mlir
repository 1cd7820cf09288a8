// RUN: relax-import-stablehlo %s | FileCheck %s
// jax.jvp of a max pool (window 2, stride 2, static 6 elements): a reduce_window of (values,
// tangents) whose body selects a window's tangent with its value. It is unrolled over the
// window's two positions as XLA evaluates it: the accumulator starts at the inits (-inf, 0) and
// takes each element, (v, t) = v >= x ? (v, t) : (x, x_t), ties keeping the first. No padding:
// no validity mask.
// CHECK-LABEL: func.func @main(%arg0: !relax.tensor<[6], f32>, %arg1: !relax.tensor<[6], f32>)
// CHECK-NOT: relax.reduce_window
// CHECK: %[[VINIT:.*]] = "relax.broadcast_to"(%{{.*}}) {shape = [3]}
// CHECK: %[[TINIT:.*]] = "relax.broadcast_to"(%{{.*}}) {shape = [3]}
// CHECK: %[[X0:.*]] = "relax.strided_slice"({{.*}}) {axes = [0], begin = [0], end = [5], strides = [2]}
// CHECK: %[[T0:.*]] = "relax.strided_slice"({{.*}}) {axes = [0], begin = [0], end = [5], strides = [2]}
// CHECK: %[[GE0:.*]] = "relax.greater_equal"(%[[VINIT]], %[[X0]])
// CHECK: %[[V0:.*]] = "relax.where"(%[[GE0]], %[[VINIT]], %[[X0]])
// CHECK: %[[U0:.*]] = "relax.where"(%[[GE0]], %[[TINIT]], %[[T0]])
// CHECK: %[[X1:.*]] = "relax.strided_slice"({{.*}}) {axes = [0], begin = [1], end = [6], strides = [2]}
// CHECK: %[[T1:.*]] = "relax.strided_slice"({{.*}}) {axes = [0], begin = [1], end = [6], strides = [2]}
// CHECK: %[[GE1:.*]] = "relax.greater_equal"(%[[V0]], %[[X1]])
// CHECK: %[[V1:.*]] = "relax.where"(%[[GE1]], %[[V0]], %[[X1]])
// CHECK: %[[U1:.*]] = "relax.where"(%[[GE1]], %[[U0]], %[[T1]])
// CHECK: return %[[V1]], %[[U1]]
module @jit_f {
  func.func public @main(%arg0: tensor<6xf32>, %arg1: tensor<6xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %0:2 = "stablehlo.reduce_window"(%arg0, %arg1, %cst_0, %cst) <{window_dimensions = array<i64: 2>, window_strides = array<i64: 2>}> ({
    ^bb0(%a: tensor<f32>, %at: tensor<f32>, %b: tensor<f32>, %bt: tensor<f32>):
      %1 = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %2 = stablehlo.select %1, %a, %b : tensor<i1>, tensor<f32>
      %3 = stablehlo.select %1, %at, %bt : tensor<i1>, tensor<f32>
      stablehlo.return %2, %3 : tensor<f32>, tensor<f32>
    }) : (tensor<6xf32>, tensor<6xf32>, tensor<f32>, tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>)
    return %0#0, %0#1 : tensor<3xf32>, tensor<3xf32>
  }
}
