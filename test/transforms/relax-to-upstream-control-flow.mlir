// RUN: relax-opt %s --relax-infer-shapes --relax-legalize --relax-to-upstream | FileCheck %s
// Control flow lowers to scf ops that call the (lowered, tensor-to-tensor) region functions:
// relax_v.while -> scf.while (condition: the i1 element of the condition function's result),
// relax_v.if -> scf.if, relax_v.case -> scf.index_switch whose default region is the LAST branch
// (StableHLO runs it for an index outside [0, N)). Captures are passed straight from the caller.
// Each scf op names the relax op it comes from (`relax.control_flow`; the GPU targets refuse them).

// CHECK-LABEL: func.func @main(
// CHECK:      %[[W:.*]]:2 = scf.while (%[[A0:.*]] = %{{.*}}, %[[A1:.*]] = %{{.*}}) : (tensor<i32>, tensor<?xf32>) -> (tensor<i32>, tensor<?xf32>) {
// CHECK:        %[[C:.*]] = func.call @cond(%[[A0]], %[[A1]], %[[Y:.*]]) : (tensor<i32>, tensor<?xf32>, tensor<?xf32>) -> tensor<i1>
// CHECK:        %[[B:.*]] = tensor.extract %[[C]][] : tensor<i1>
// CHECK:        scf.condition(%[[B]]) %[[A0]], %[[A1]] : tensor<i32>, tensor<?xf32>
// CHECK:      } do {
// CHECK:      ^bb0(%[[D0:.*]]: tensor<i32>, %[[D1:.*]]: tensor<?xf32>):
// CHECK:        %[[N:.*]]:2 = func.call @body(%[[D0]], %[[D1]], %[[Y]])
// CHECK:        scf.yield %[[N]]#0, %[[N]]#1 : tensor<i32>, tensor<?xf32>
// CHECK:      } attributes {relax.control_flow = "relax_v.while"}
// CHECK:      %[[P:.*]] = tensor.extract %{{.*}}[] : tensor<i1>
// CHECK:      %[[IF:.*]] = scf.if %[[P]] -> (tensor<?xf32>) {
// CHECK:        func.call @then(%[[W]]#1)
// CHECK:      } else {
// CHECK:        func.call @else(%[[W]]#1)
// CHECK:      } {relax.control_flow = "relax_v.if"}
// CHECK:      %[[K:.*]] = tensor.extract %{{.*}}[] : tensor<i32>
// CHECK:      %[[IX:.*]] = arith.index_cast %[[K]] : i32 to index
// CHECK:      scf.index_switch %[[IX]] {relax.control_flow = "relax_v.case"} -> tensor<?xf32>
// CHECK-NEXT: case 0 {
// CHECK:        func.call @b0(%[[IF]])
// CHECK:      case 1 {
// CHECK:        func.call @b1(%[[IF]])
// CHECK:      default {
// CHECK:        func.call @b2(%[[IF]])
// CHECK:      func.func private @cond(%{{.*}}: tensor<i32>, %{{.*}}: tensor<?xf32>, %{{.*}}: tensor<?xf32>) -> tensor<i1>
// CHECK:      func.func private @body(
// CHECK-SAME:   -> (tensor<i32>, tensor<?xf32>)

func.func @main(%x: !relax.tensor<["n"], f32>, %y: !relax.tensor<["n"], f32>, %p: !relax.tensor<[], i1>,
                %i: !relax.tensor<[], i32>) -> !relax.tensor<["?"], f32> {
  %c0 = "relax.constant"() {value = dense<0> : tensor<i32>} : () -> !relax.tensor<[], i32>
  %w:2 = "relax_v.while"(%c0, %x, %y) {cond = @cond, body = @body, carried = 2 : i64}
      : (!relax.tensor<[], i32>, !relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>)
      -> (!relax.tensor<[], i32>, !relax.tensor<["?"], f32>)
  %s = "relax_v.if"(%p, %w#1) {then_branch = @then, else_branch = @else}
      : (!relax.tensor<[], i1>, !relax.tensor<["?"], f32>) -> !relax.tensor<["?"], f32>
  %u = "relax_v.case"(%i, %s) {branches = [@b0, @b1, @b2]}
      : (!relax.tensor<[], i32>, !relax.tensor<["?"], f32>) -> !relax.tensor<["?"], f32>
  return %u : !relax.tensor<["?"], f32>
}
func.func private @cond(%k: !relax.tensor<[], i32>, %v: !relax.tensor<["n"], f32>, %y: !relax.tensor<["n"], f32>) -> !relax.tensor<[], i1> attributes {relax.region} {
  %c3 = "relax.constant"() {value = dense<3> : tensor<i32>} : () -> !relax.tensor<[], i32>
  %0 = "relax.less"(%k, %c3) : (!relax.tensor<[], i32>, !relax.tensor<[], i32>) -> !relax.tensor<[], i1>
  return %0 : !relax.tensor<[], i1>
}
func.func private @body(%k: !relax.tensor<[], i32>, %v: !relax.tensor<["n"], f32>, %y: !relax.tensor<["n"], f32>) -> (!relax.tensor<[], i32>, !relax.tensor<["n"], f32>) attributes {relax.region} {
  %c1 = "relax.constant"() {value = dense<1> : tensor<i32>} : () -> !relax.tensor<[], i32>
  %0 = "relax.add"(%k, %c1) : (!relax.tensor<[], i32>, !relax.tensor<[], i32>) -> !relax.tensor<[], i32>
  %1 = "relax.multiply"(%v, %y) : (!relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  return %0, %1 : !relax.tensor<[], i32>, !relax.tensor<["n"], f32>
}
func.func private @then(%v: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32> attributes {relax.region} {
  %0 = "relax.exp"(%v) : (!relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  return %0 : !relax.tensor<["n"], f32>
}
func.func private @else(%v: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32> attributes {relax.region} {
  return %v : !relax.tensor<["n"], f32>
}
func.func private @b0(%v: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32> attributes {relax.region} {
  %0 = "relax.negative"(%v) : (!relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  return %0 : !relax.tensor<["n"], f32>
}
func.func private @b1(%v: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32> attributes {relax.region} {
  %0 = "relax.sqrt"(%v) : (!relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  return %0 : !relax.tensor<["n"], f32>
}
func.func private @b2(%v: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32> attributes {relax.region} {
  return %v : !relax.tensor<["n"], f32>
}
