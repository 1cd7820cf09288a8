// RUN: relax-opt %s | FileCheck %s
// RUN: relax-opt %s | relax-opt | FileCheck %s
// Round trip of every op family in the generic form.

// CHECK-LABEL: func.func @families
// CHECK-SAME: (%[[X:.*]]: !relax.tensor<["n", 4], f32>, %[[I:.*]]: !relax.tensor<["k"], i32>)
func.func @families(%x: !relax.tensor<["n", 4], f32>, %i: !relax.tensor<["k"], i32>) -> !relax.tensor<["n", 4], f32> {
  // CHECK: %[[E:.*]] = "relax.exp"(%[[X]]) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %e = "relax.exp"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  // CHECK: "relax.add"(%[[E]], %[[X]])
  %a = "relax.add"(%e, %x) : (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  // CHECK: "relax.less"
  %c = "relax.less"(%a, %x) : (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], i1>
  // CHECK: "relax.where"
  %w = "relax.where"(%c, %a, %x) : (!relax.tensor<["n", 4], i1>, !relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  // CHECK: "relax.astype"(%{{.*}}) {dtype = f16}
  %h = "relax.astype"(%w) {dtype = f16} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f16>
  // CHECK: "relax.permute_dims"(%{{.*}}) {axes = [1, 0]}
  %p = "relax.permute_dims"(%w) {axes = [1, 0]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<[4, "n"], f32>
  // CHECK: "relax.matmul"
  %m = "relax.matmul"(%w, %p) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[4, "n"], f32>) -> !relax.tensor<["n", "n"], f32>
  // CHECK: "relax.reshape"(%{{.*}}) {shape = ["4*n"]}
  %r = "relax.reshape"(%w) {shape = ["4*n"]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["4*n"], f32>
  // CHECK: "relax_v.concat"
  %cc = "relax_v.concat"(%w, %x) {axis = 0} : (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["2*n", 4], f32>
  // CHECK: "relax_v.split"
  %s:2 = "relax_v.split"(%cc) {axis = 0, sections = 2} : (!relax.tensor<["2*n", 4], f32>) -> (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>)
  // CHECK: "relax.strided_slice"
  %sl = "relax.strided_slice"(%x) {axes = [1], begin = [1], end = [3], strides = [1]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 2], f32>
  // CHECK: "relax.take"(%{{.*}}, %[[I]])
  %t = "relax.take"(%x, %i) {axis = 0} : (!relax.tensor<["n", 4], f32>, !relax.tensor<["k"], i32>) -> !relax.tensor<["k", 4], f32>
  // CHECK: "relax.sum"
  %su = "relax.sum"(%x) {axes = [1], keepdims = true} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 1], f32>
  // CHECK: "relax.softmax"
  %sm = "relax.softmax"(%x) {axis = -1} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  // CHECK: "relax.zeros"
  %z = "relax.zeros"() {shape = ["n", 4], dtype = f32} : () -> !relax.tensor<["n", 4], f32>
  // CHECK: "relax.arange"
  %ar = "relax.arange"() {end = "n", dtype = i32} : () -> !relax.tensor<["n"], i32>
  // CHECK: "relax.shape_of"(%[[X]]) : (!relax.tensor<["n", 4], f32>) -> !relax.shape<["n", 4]>
  %sh = "relax.shape_of"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.shape<["n", 4]>
  // CHECK: "relax.match_cast"
  %mc = "relax.match_cast"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["q", 4], f32>
  // CHECK: "relax_v.dataflow"
  // CHECK: gpu.yield
  %d = "relax_v.dataflow"() ({
    %in = "relax.negative"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
    gpu.yield %in : !relax.tensor<["n", 4], f32>
  }) : () -> !relax.tensor<["n", 4], f32>
  return %d : !relax.tensor<["n", 4], f32>
}
