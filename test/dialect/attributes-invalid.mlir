// RUN: relax-opt %s --split-input-file --verify-diagnostics
// Ill-typed attributes are located diagnostics at the op, never an internal error.

func.func @axes_string(%x: !relax.tensor<["n", 4], f32>) {
  // expected-error @+1 {{'relax.permute_dims' op attribute 'axes' must be an array, got string}}
  %0 = "relax.permute_dims"(%x) {axes = "x"} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["?", "?"], f32>
  return
}

// -----

func.func @shape_float(%x: !relax.tensor<["n", 4], f32>) {
  // expected-error @+1 {{'relax.reshape' op attribute 'shape' element 0 must be an integer or a symbolic expression string, got float 1.5}}
  %0 = "relax.reshape"(%x) {shape = [1.5]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @shape_bad_expr(%x: !relax.tensor<["n", 4], f32>) {
  // expected-error @+1 {{'relax.reshape' op attribute 'shape' element 0 'n*' is not a symbolic expression}}
  %0 = "relax.reshape"(%x) {shape = ["n*", 4]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["?", 4], f32>
  return
}

// -----

func.func @axes_nested(%x: !relax.tensor<["n", 4], f32>) {
  // expected-error @+1 {{'relax.sum' op attribute 'axes' must hold integers, element 0 is array [1]}}
  %0 = "relax.sum"(%x) {axes = [[1]]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @axes_unit(%x: !relax.tensor<["n", 4], f32>) {
  // expected-error @+1 {{'relax.sum' op attribute 'axes' must hold integers, element 0 is string 'x'}}
  %0 = "relax.sum"(%x) {axes = ["x"]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @keepdims_int(%x: !relax.tensor<["n", 4], f32>) {
  // expected-error @+1 {{'relax.sum' op attribute 'keepdims' must be a bool (true or false), got integer 3}}
  %0 = "relax.sum"(%x) {axes = [1], keepdims = 3} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @missing_shape(%x: !relax.tensor<["n", 4], f32>) {
  // expected-error @+1 {{'relax.reshape' op attribute "shape" is expected but not provided}}
  %0 = "relax.reshape"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @slice_begin_float(%x: !relax.tensor<["n", 4], f32>) {
  // expected-error @+1 {{'relax.strided_slice' op attribute 'begin' element 0 must be an integer or a symbolic expression string, got float 0.5}}
  %0 = "relax.strided_slice"(%x) {axes = [0], begin = [0.5], end = [2]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["?", 4], f32>
  return
}

// -----

func.func @arange_end_float() {
  // expected-error @+1 {{'relax.arange' op attribute 'end' must be an integer or a symbolic expression string, got float 2.5}}
  %0 = "relax.arange"() {end = 2.5, dtype = i64} : () -> !relax.tensor<["?"], i64>
  return
}

// -----

func.func @full_huge(%v: !relax.tensor<[], f32>) {
  // expected-error @+1 {{'relax.full' op result #0 has 4503599627366400 bytes of static size, above the supported 281474976710656 (2^48)}}
  %0 = "relax.full"(%v) {shape = [1099511627775, 1024]} : (!relax.tensor<[], f32>) -> !relax.tensor<["?", 1024], f32>
  return
}

// -----

func.func @full_dim_too_large(%v: !relax.tensor<[], f32>) {
  // expected-error @+1 {{'relax.full' op attribute 'shape' element 0 is 1099511627776, beyond the largest dim 1099511627775}}
  %0 = "relax.full"(%v) {shape = [1099511627776]} : (!relax.tensor<[], f32>) -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @add_one_operand(%x: !relax.tensor<["n", 4], f32>) {
  // expected-error @+1 {{'relax.add' op expects exactly 2 operands, but got 1}}
  %0 = "relax.add"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["?", "?"], f32>
  return
}

// -----

func.func @call_tir_callee_array(%x: !relax.tensor<[4], f32>) -> !relax.tensor<[4], f32> {
  // expected-error @+1 {{'relax_v.call_tir' op attribute 'callee' must be a symbol reference (@name), got array}}
  %0 = "relax_v.call_tir"(%x) {callee = []} : (!relax.tensor<[4], f32>) -> !relax.tensor<[4], f32>
  return %0 : !relax.tensor<[4], f32>
}
func.func private @k(%in0: tensor<4xf32>, %out0: tensor<4xf32>) -> (tensor<4xf32>) attributes {relax.kernel = "exp"} {
  return %in0 : tensor<4xf32>
}

// -----

func.func @astype_dtype_int(%x: !relax.tensor<[4], f32>) {
  // expected-error @+1 {{'relax.astype' op expected base attribute 'builtin.type' but got 'builtin.integer'}}
  %0 = "relax.astype"(%x) {dtype = 3} : (!relax.tensor<[4], f32>) -> !relax.tensor<[4], f32>
  return
}
