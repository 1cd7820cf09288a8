// RUN: relax-opt %s --split-input-file --relax-infer-shapes --verify-diagnostics

func.func @matmul_inner(%x: !relax.tensor<["n", "k"], f32>, %w: !relax.tensor<[16, 32], f32>) {
  // expected-error @+1 {{'relax.matmul' op inner dimensions differ: k vs 16; symbols: k}}
  %0 = "relax.matmul"(%x, %w) : (!relax.tensor<["n", "k"], f32>, !relax.tensor<[16, 32], f32>) -> !relax.tensor<["?", "?"], f32>
  return
}

// -----

func.func @broadcast(%x: !relax.tensor<["n", 4], f32>, %y: !relax.tensor<["m", 4], f32>) {
  // expected-error @+1 {{'relax.add' op broadcast dimensions differ: n vs m (dim 0 of the result, from lhs and rhs); symbols: m, n}}
  %0 = "relax.add"(%x, %y) : (!relax.tensor<["n", 4], f32>, !relax.tensor<["m", 4], f32>) -> !relax.tensor<["?", 4], f32>
  return
}

// -----

func.func @reshape_count(%x: !relax.tensor<["b", "s", 64], f32>) {
  // expected-error @+1 {{'relax.reshape' op cannot reshape [b, s, 64] to [b, 64]: element counts 64*b*s vs 64*b are not provably equal}}
  %0 = "relax.reshape"(%x) {shape = ["b", 64]} : (!relax.tensor<["b", "s", 64], f32>) -> !relax.tensor<["?", "?"], f32>
  return
}

// -----

func.func @declared_mismatch(%x: !relax.tensor<["n", 4], f32>) {
  // expected-error @+1 {{'relax.exp' op result #0 dim 0 is declared m but deduced n (symbols: m, n)}}
  %0 = "relax.exp"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["m", 4], f32>
  return
}

// -----

func.func @concat_dims(%a: !relax.tensor<["m", 3], f32>, %b: !relax.tensor<["n", 4], f32>) {
  // expected-error @+1 {{'relax_v.concat' op operand #1 dim 1 is 4, expected 3}}
  %0 = "relax_v.concat"(%a, %b) {axis = 0} : (!relax.tensor<["m", 3], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["?", "?"], f32>
  return
}

// -----

func.func @unbound(%x: !relax.tensor<["n"], f32>) {
  // expected-error @+1 {{'relax.zeros' op uses symbol 'q', which is not bound in this function}}
  %0 = "relax.zeros"() {shape = ["q"], dtype = f32} : () -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @cast_never(%x: !relax.tensor<["n", 4], f32>) {
  // expected-error @+1 {{'relax.match_cast' op can never succeed: dim 1 is 4, the pattern says 8}}
  %0 = "relax.match_cast"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 8], f32>
  return
}

// -----

func.func @reshape_two_unknown(%x: !relax.tensor<["?", "?"], f32>) {
  // expected-error @+1 {{'relax.reshape' op operand #0 dim 0 is unknown ('?') and the op cannot check it at run time; refine it with relax.match_cast}}
  %0 = "relax.reshape"(%x) {shape = [12]} : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @reshape_never(%x: !relax.tensor<["?", 3], f32>) {
  // expected-error @+1 {{'relax.reshape' op cannot reshape [?, 3] to [10]: 10 elements are not a multiple of 3}}
  %0 = "relax.reshape"(%x) {shape = [10]} : (!relax.tensor<["?", 3], f32>) -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @matmul_both_unknown(%a: !relax.tensor<[4, "?"], f32>, %b: !relax.tensor<["?", 3], f32>) {
  // expected-error @+1 {{'relax.matmul' op operand #0 ('lhs') dim 1 is unknown ('?') and the op cannot check it at run time}}
  %0 = "relax.matmul"(%a, %b) : (!relax.tensor<[4, "?"], f32>, !relax.tensor<["?", 3], f32>) -> !relax.tensor<["?", "?"], f32>
  return
}
