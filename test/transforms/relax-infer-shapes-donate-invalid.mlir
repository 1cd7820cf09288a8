// RUN: relax-opt %s --split-input-file --relax-infer-shapes --verify-diagnostics

// relax.donate = r: result r is written into the argument's buffer, so it must have exactly the
// argument's type (dims proven equal), name an existing result, and be donated once.

// expected-error @+1 {{'func.func' op argument #0 (relax.donate = 0): result #0 has type !relax.tensor<["n", 3], f32>, which is not the argument's type !relax.tensor<["n", 4], f32>}}
func.func @other_shape(%x: !relax.tensor<["n", 4], f32> {relax.donate = 0 : i64}) -> !relax.tensor<["n", 3], f32> {
  %s = "relax.strided_slice"(%x) {axes = [1], begin = [0], end = [3], strides = [1]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 3], f32>
  return %s : !relax.tensor<["n", 3], f32>
}

// -----

// expected-error @+1 {{'func.func' op argument #0 (relax.donate = 0): result #0 has type !relax.tensor<["n", 4], f16>, which is not the argument's type !relax.tensor<["n", 4], f32>}}
func.func @other_dtype(%x: !relax.tensor<["n", 4], f32> {relax.donate = 0 : i64}) -> !relax.tensor<["n", 4], f16> {
  %c = "relax.astype"(%x) {dtype = f16} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f16>
  return %c : !relax.tensor<["n", 4], f16>
}

// -----

// expected-error @+1 {{'func.func' op argument #1 (relax.donate = 0): result #0 is already donated argument #0's buffer}}
func.func @twice(%x: !relax.tensor<["n"], f32> {relax.donate = 0 : i64}, %y: !relax.tensor<["n"], f32> {relax.donate = 0 : i64}) -> !relax.tensor<["n"], f32> {
  %a = "relax.add"(%x, %y) : (!relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
  return %a : !relax.tensor<["n"], f32>
}

// -----

// expected-error @+1 {{'func.func' op argument #0 (relax.donate = 2): the function has 1 results}}
func.func @no_such_result(%x: !relax.tensor<["n"], f32> {relax.donate = 2 : i64}) -> !relax.tensor<["n"], f32> {
  return %x : !relax.tensor<["n"], f32>
}

// -----

// expected-error @+1 {{'func.func' op argument #0 (relax.donate = 0): result #0 has type !relax.tensor<["m"], f32>, which is not the argument's type !relax.tensor<["n"], f32>}}
func.func @other_symbol(%x: !relax.tensor<["n"], f32> {relax.donate = 0 : i64}, %y: !relax.tensor<["m"], f32>) -> !relax.tensor<["m"], f32> {
  return %y : !relax.tensor<["m"], f32>
}
