// RUN: relax-opt %s --split-input-file --verify-diagnostics
// One verifier failure per op family: each names the op, the dims and the symbols.

func.func @take_float_indices(%x: !relax.tensor<["n", 4], f32>, %i: !relax.tensor<["k"], f32>) {
  // expected-error @+1 {{'relax.take' op indices must have an integer element type, got f32}}
  %0 = "relax.take"(%x, %i) {axis = 0} : (!relax.tensor<["n", 4], f32>, !relax.tensor<["k"], f32>) -> !relax.tensor<["?", "?"], f32>
  return
}

// -----

func.func @permute_bad_axes(%x: !relax.tensor<["n", 4], f32>) {
  // expected-error @+1 {{'relax.permute_dims' op axes [0, 0] are not a permutation of rank 2}}
  %0 = "relax.permute_dims"(%x) {axes = [0, 0]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["?", "?"], f32>
  return
}

// -----

// An axis past the rank is refused (it was taken modulo the rank: [0, 5] ran as [0, 1]).
func.func @permute_axis_range(%x: !relax.tensor<["n", 4], f32>) {
  // expected-error @+1 {{'relax.permute_dims' op permutation axis 5 is out of range for rank 2}}
  %0 = "relax.permute_dims"(%x) {axes = [0, 5]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  return
}

// -----

func.func @sum_axis_range(%x: !relax.tensor<["n", 4], f32>) {
  // expected-error @+1 {{'relax.sum' op axes 2 is out of range for rank 2}}
  %0 = "relax.sum"(%x) {axes = [2]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @layer_norm_gamma(%x: !relax.tensor<["n", 4], f32>, %g: !relax.tensor<[5], f32>) {
  // expected-error @+1 {{'relax.layer_norm' op gamma has shape ['5'], expected the normalized dims ['4']}}
  %0 = "relax.layer_norm"(%x, %g, %g) {axes = [-1]} : (!relax.tensor<["n", 4], f32>, !relax.tensor<[5], f32>, !relax.tensor<[5], f32>) -> !relax.tensor<["?", "?"], f32>
  return
}

// -----

func.func @rms_norm_dtype(%x: !relax.tensor<["n", 4], f32>, %g: !relax.tensor<[4], f16>) {
  // expected-error @+1 {{'relax.rms_norm' op weight element type f16 differs from the operand's f32}}
  %0 = "relax.rms_norm"(%x, %g) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[4], f16>) -> !relax.tensor<["?", "?"], f32>
  return
}

// -----

func.func @where_cond(%c: !relax.tensor<["n"], f32>, %x: !relax.tensor<["n"], f32>) {
  // expected-error @+1 {{'relax.where' op condition must be i1, got f32}}
  %0 = "relax.where"(%c, %x, %x) : (!relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>) -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @full_rank(%v: !relax.tensor<[2], f32>) {
  // expected-error @+1 {{'relax.full' op fill value must be a rank-0 tensor, got rank 1}}
  %0 = "relax.full"(%v) {shape = [3]} : (!relax.tensor<[2], f32>) -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @arange_step(%x: !relax.tensor<["n"], f32>) {
  // expected-error @+1 {{'relax.arange' op step must be a non-zero integer, got 0}}
  %0 = "relax.arange"() {end = "n", step = 0, dtype = i32} : () -> !relax.tensor<["?"], i32>
  return
}

// -----

func.func @split_divisible(%x: !relax.tensor<["n"], f32>) {
  // expected-error @+1 {{'relax_v.split' op dim n is not provably divisible into 2 sections; symbols: n}}
  %0:2 = "relax_v.split"(%x) {axis = 0, sections = 2} : (!relax.tensor<["n"], f32>) -> (!relax.tensor<["?"], f32>, !relax.tensor<["?"], f32>)
  return
}

// -----

func.func @slice_stride(%x: !relax.tensor<["n"], f32>) {
  // expected-error @+1 {{'relax.strided_slice' op strides must be positive integers, got 0}}
  %0 = "relax.strided_slice"(%x) {axes = [0], begin = [0], end = [4], strides = [0]} : (!relax.tensor<["n"], f32>) -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @astype_dtype(%x: !relax.tensor<["n"], f32>) {
  // expected-error @+1 {{'relax.astype' op unsupported dtype i128}}
  %0 = "relax.astype"(%x) {dtype = i128} : (!relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  return
}

// -----

func.func @broadcast_to(%x: !relax.tensor<["n", 3], f32>) {
  // expected-error @+1 {{'relax.broadcast_to' op cannot broadcast dim 1 of size 3 to 4}}
  %0 = "relax.broadcast_to"(%x) {shape = ["n", 4]} : (!relax.tensor<["n", 3], f32>) -> !relax.tensor<["?", "?"], f32>
  return
}

// -----

func.func @logical_and_dtype(%x: !relax.tensor<["n"], f32>) {
  // expected-error @+1 {{'relax.logical_and' op operands must be i1, got f32}}
  %0 = "relax.logical_and"(%x, %x) : (!relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>) -> !relax.tensor<["?"], i1>
  return
}

// -----

func.func @binary_dtype(%x: !relax.tensor<["n"], f32>, %y: !relax.tensor<["n"], f16>) {
  // expected-error @+1 {{'relax.multiply' op element types differ: lhs is f32, rhs is f16}}
  %0 = "relax.multiply"(%x, %y) : (!relax.tensor<["n"], f32>, !relax.tensor<["n"], f16>) -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @softmax_int(%x: !relax.tensor<["n"], i32>) {
  // expected-error @+1 {{'relax.softmax' op operand must have a floating-point element type, got i32}}
  %0 = "relax.softmax"(%x) : (!relax.tensor<["n"], i32>) -> !relax.tensor<["?"], i32>
  return
}

// -----

func.func @mean_int(%x: !relax.tensor<["n"], i32>) {
  // expected-error @+1 {{'relax.mean' op mean needs a floating-point element type, got i32}}
  %0 = "relax.mean"(%x) : (!relax.tensor<["n"], i32>) -> !relax.tensor<[], i32>
  return
}

// -----

func.func @concat_rank(%x: !relax.tensor<["n"], f32>, %y: !relax.tensor<["n", 2], f32>) {
  // expected-error @+1 {{'relax_v.concat' op operands have different ranks [1, 2]}}
  %0 = "relax_v.concat"(%x, %y) : (!relax.tensor<["n"], f32>, !relax.tensor<["n", 2], f32>) -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @unranked_operand(%x: !relax.unranked_tensor<f32>) {
  // expected-error @+1 {{'relax.match_cast' op cannot bind symbol 'n'}}
  %0 = "relax.match_cast"(%x) : (!relax.unranked_tensor<f32>) -> !relax.tensor<["n*2"], f32>
  return
}


// -----

// Recursion (direct or mutual) is refused at the call (relax-to-upstream made an invalid call of it).
func.func @even(%a: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32> {
  %0 = func.call @odd(%a) : (!relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  return %0 : !relax.tensor<["n"], f32>
}
func.func @odd(%a: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32> {
  // expected-error @+1 {{'func.call' op @even is called recursively (directly or through other functions): recursion is not supported}}
  %0 = func.call @even(%a) : (!relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  return %0 : !relax.tensor<["n"], f32>
}
