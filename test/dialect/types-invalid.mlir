// RUN: relax-opt %s --split-input-file --verify-diagnostics
// Size limits of relax types (dialect/types.py): a static dim lies in [0, 2^40 - 1] and a tensor's
// static size (static dims times element size) is at most 2^48 bytes.

// expected-error @+1 {{'func.func' op invalid type !relax.tensor<[4611686018427387904, 4], f32>: has dim 0 = 4611686018427387904, above the largest supported dim 1099511627775}}
func.func @dim_2_62(%x: !relax.tensor<[4611686018427387904, 4], f32>) -> !relax.tensor<[4611686018427387904, 4], f32> {
  return %x : !relax.tensor<[4611686018427387904, 4], f32>
}

// -----

// expected-error @+1 {{'func.func' op invalid type !relax.tensor<[-3, 4], f32>: has a negative dim -3 (dim 0)}}
func.func @negative_dim(%x: !relax.tensor<[-3, 4], f32>) {
  return
}

// -----

// expected-error @+1 {{has 562949953421312 bytes of static size, above the supported 281474976710656 (2^48)}}
func.func @too_many_bytes(%x: !relax.tensor<["n", 1073741824, 65536], f64>) {
  return
}

// -----

func.func @result_negative(%x: !relax.tensor<["n", 4], f32>) {
  // expected-error @+1 {{'relax.exp' op invalid type !relax.tensor<[-1, 4], f32>: has a negative dim -1 (dim 0)}}
  %0 = "relax.exp"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<[-1, 4], f32>
  return
}

// -----

// MLIR verifies no dominance in an unregistered op's region: the relax verifier does.
func.func @dataflow_use_before_def(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %d = "relax_v.dataflow"() ({
    // expected-error @+1 {{'relax.negative' op operand #0 is used before its definition in the relax_v.dataflow body}}
    %n = "relax.negative"(%e) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
    %e = "relax.exp"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
    gpu.yield %n : !relax.tensor<["n", 4], f32>
  }) : () -> !relax.tensor<["n", 4], f32>
  return %d : !relax.tensor<["n", 4], f32>
}
