// RUN: not relax-import-stablehlo %s 2>&1 | FileCheck %s
// A while whose body returns a carried value of another shape (it doubles it): the loop cannot
// keep it in one type, so the import is refused at the op, naming the value and both types.
// CHECK: error: 'relax_v.while' op carried value #1 changes type in the body @main_while1_body: carried as !relax.tensor<["d0"], f32>, returned as !relax.tensor<["2*d0"], f32>
func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%a = %c0, %v = %x) : tensor<i32>, tensor<?xf32>
  cond {
    %c3 = stablehlo.constant dense<3> : tensor<i32>
    %1 = stablehlo.compare LT, %a, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %1 = stablehlo.add %a, %c1 : tensor<i32>
    %2 = stablehlo.concatenate %v, %v, dim = 0 : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
    stablehlo.return %1, %2 : tensor<i32>, tensor<?xf32>
  }
  return %0#1 : tensor<?xf32>
}
