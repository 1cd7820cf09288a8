// REQUIRES: ptxas
// RUN: relax-opt %s --relax-legalize --relax-to-upstream --relax-gpu-map --test-relax-gpu-ptx | FileCheck %s
// RUN: relax-opt %s --relax-legalize --relax-to-upstream --relax-gpu-map --relax-gpu-to-ptx | FileCheck %s --check-prefix=BIN
// RUN: relax-opt %s --relax-legalize --relax-to-upstream --relax-gpu-map --test-relax-gpu-ptx | sed -n 's|^// ||p' | sed '/^ptx @main_kernel_0$/,$d' | sed '1d' > %t.ptx
// RUN: ptxas -arch=sm_90 %t.ptx -o %t.cubin

// Softmax over the last axis: three kernels (row max, row sum of exp, divide; the inits of the
// max and the sum are fused into them);
// each becomes PTX for sm_90 with its memref descriptors and the dynamic dim as .param.
// CHECK: // ptx @main_kernel
// CHECK: // .version 8.0
// CHECK: // .target sm_90
// CHECK: // .visible .entry main_kernel(
// CHECK: // .param .u64 main_kernel_param_0
// CHECK: // ptx @main_kernel_0
// CHECK: // .visible .entry main_kernel(
// CHECK: ex2.approx
// CHECK: // ptx @main_kernel_1
// CHECK: // .visible .entry main_kernel(
// CHECK: div.rn.f32
// CHECK-NOT: gpu.module

// BIN: llvm.func @main(
// BIN: gpu.launch_func  @main_kernel_1::@main_kernel
// BIN: gpu.binary @main_kernel [#gpu.object<#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">, properties = {{.*}}, assembly = "
// BIN-SAME: .target sm_90
// BIN-SAME: .entry main_kernel
// BIN: gpu.binary @main_kernel_1
// BIN-NOT: gpu.module
func.func @main(%x: !relax.tensor<["n", 32], f32>) -> !relax.tensor<["?", "?"], f32> {
  %s = "relax.softmax"(%x) {axis = -1} : (!relax.tensor<["n", 32], f32>) -> !relax.tensor<["?", "?"], f32>
  return %s : !relax.tensor<["?", "?"], f32>
}
