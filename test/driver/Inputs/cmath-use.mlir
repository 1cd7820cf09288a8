func.func @g(%x: !cmath.complex<f32>) -> f32 {
  %0 = "cmath.norm"(%x) : (!cmath.complex<f32>) -> f32
  return %0 : f32
}
