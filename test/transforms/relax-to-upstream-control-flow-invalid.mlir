// RUN: not relax-opt %s --relax-infer-shapes --relax-legalize --relax-to-upstream 2>&1 | FileCheck %s
// A region function has no error channel: a run-time check of its body (here a match_cast that
// needs n == 4) would be skipped, so the lowering refuses it at the check.
// CHECK: error: 'relax.assert' op: the run-time check '{{.*}}' inside a loop or branch body is not supported yet

func.func @main(%p: !relax.tensor<[], i1>, %x: !relax.tensor<["n"], f32>) -> !relax.tensor<[4], f32> {
  %s = "relax_v.if"(%p, %x) {then_branch = @t, else_branch = @e}
      : (!relax.tensor<[], i1>, !relax.tensor<["n"], f32>) -> !relax.tensor<[4], f32>
  return %s : !relax.tensor<[4], f32>
}
func.func private @t(%v: !relax.tensor<["n"], f32>) -> !relax.tensor<[4], f32> attributes {relax.region} {
  %0 = "relax.match_cast"(%v) : (!relax.tensor<["n"], f32>) -> !relax.tensor<[4], f32>
  return %0 : !relax.tensor<[4], f32>
}
func.func private @e(%v: !relax.tensor<["n"], f32>) -> !relax.tensor<[4], f32> attributes {relax.region} {
  %0 = "relax.match_cast"(%v) : (!relax.tensor<["n"], f32>) -> !relax.tensor<[4], f32>
  %1 = "relax.exp"(%0) : (!relax.tensor<[4], f32>) -> !relax.tensor<[4], f32>
  return %1 : !relax.tensor<[4], f32>
}
