// RUN: relax-opt %s --relax-legalize --relax-to-upstream --relax-to-spirv | FileCheck %s

// Kernels become SPIR-V entry points; the host side launches them.
// CHECK: func.func @main
// CHECK: gpu.launch_func
// CHECK: spirv.module @{{.*}} Logical GLSL450
// CHECK: spirv.func @main_kernel
// CHECK: spirv.EntryPoint "GLCompute" @main_kernel
func.func @main(%x: !relax.tensor<["n", 8], f32>, %b: !relax.tensor<[8], f32>) -> !relax.tensor<["n", 8], f32> {
  %a = "relax.add"(%x, %b) : (!relax.tensor<["n", 8], f32>, !relax.tensor<[8], f32>) -> !relax.tensor<["n", 8], f32>
  %e = "relax.exp"(%a) : (!relax.tensor<["n", 8], f32>) -> !relax.tensor<["n", 8], f32>
  return %e : !relax.tensor<["n", 8], f32>
}
