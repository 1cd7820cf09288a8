// RUN: relax-opt %s --split-input-file --relax-infer-shapes --verify-diagnostics
// RUN: relax-opt %s --split-input-file --relax-lower-shapes --verify-diagnostics
// `relax.requires` (the shape relations relax-infer-shapes records for relax-lower-shapes) may
// come from the input: a malformed one is a located error of the function, never an internal one.

// expected-error @+1 {{'func.func' op attribute 'relax.requires' must be an array of dictionaries {lhs, rhs or rhs_dim, message}}}
func.func @not_an_array(%x: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32> attributes {relax.requires = 5} {
  return %x : !relax.tensor<["n"], f32>
}

// -----

// expected-error @+1 {{'func.func' op attribute 'relax.requires' must be an array of dictionaries {lhs, rhs or rhs_dim, message}}}
func.func @message_not_a_string(%x: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32> attributes {relax.requires = [{lhs = "1", rhs = "n", message = 3}]} {
  return %x : !relax.tensor<["n"], f32>
}

// -----

// expected-error @+1 {{'func.func' op attribute 'relax.requires': expected an integer, a symbol or '(', got end of input at position 3 in shape expression 'n +'}}
func.func @bad_expression(%x: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32> attributes {relax.requires = [{lhs = "1", rhs = "n +", message = "m"}]} {
  return %x : !relax.tensor<["n"], f32>
}
