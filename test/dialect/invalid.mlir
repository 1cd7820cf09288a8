// RUN: relax-opt %s --split-input-file --verify-diagnostics

func.func @unknown_op(%x: !relax.tensor<["n"], f32>) {
  // expected-error @+1 {{unregistered operation 'relax.bogus'}}
  %0 = "relax.bogus"(%x) : (!relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  return
}

// -----

func.func @operand_count(%x: !relax.tensor<["n"], f32>) {
  // expected-error @+1 {{expects exactly 2 operands, but got 1}}
  %0 = "relax.add"(%x) : (!relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  return
}

// -----

func.func @bad_dims(%x: !relax.tensor<["n"], f32>) {
  // expected-error @+1 {{invalid type !relax.tensor<["n+"], f32>}}
  %0 = "relax.exp"(%x) : (!relax.tensor<["n"], f32>) -> !relax.tensor<["n+"], f32>
  return
}

// -----

func.func @bad_dtype(%x: !relax.tensor<["n"], f32>) {
  // expected-error @+1 {{'i128' does not satisfy the constraint}}
  %0 = "relax.exp"(%x) : (!relax.tensor<["n"], f32>) -> !relax.tensor<["n"], i128>
  return
}

// -----

func.func @float_only(%x: !relax.tensor<["n"], i32>) {
  // expected-error @+1 {{'relax.exp' op operand must have a floating-point element type, got i32}}
  %0 = "relax.exp"(%x) : (!relax.tensor<["n"], i32>) -> !relax.tensor<["n"], i32>
  return
}

// -----

func.func @missing_attr(%x: !relax.tensor<["n"], f32>) {
  // expected-error @+1 {{'relax_v.call_tir' op requires attribute 'callee'}}
  %0 = "relax_v.call_tir"(%x) : (!relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  return
}
