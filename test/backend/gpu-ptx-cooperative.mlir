// REQUIRES: ptxas
// RUN: relax-opt %s --relax-legalize --relax-to-upstream --relax-gpu-map --test-relax-gpu-ptx | FileCheck %s
// RUN: relax-opt %s --relax-legalize --relax-to-upstream --relax-gpu-map --test-relax-gpu-ptx | sed -n 's|^// ||p' | sed -n '/^ptx @main_kernel$/,/^ptx @main_kernel_0$/p' | sed '1d;$d' > %t.matmul.ptx
// RUN: ptxas -arch=sm_90 %t.matmul.ptx -o %t.matmul.cubin
// RUN: relax-opt %s --relax-legalize --relax-to-upstream --relax-gpu-map --test-relax-gpu-ptx | sed -n 's|^// ||p' | sed -n '/^ptx @main_kernel_0$/,$p' | sed '1d' > %t.reduce.ptx
// RUN: ptxas -arch=sm_90 %t.reduce.ptx -o %t.reduce.cubin

// A matmul, then a max over each row of its result: two kernels (the matmul and the row max,
// each with its init fused). Both use shared memory (workgroup attributions -> .shared globals)
// and bar.sync (gpu.barrier); ptxas assembles both for sm_90.
// CHECK: // ptx @main_kernel{{$}}
// CHECK: // .visible .entry main_kernel(
// CHECK-DAG: // {{.*}}.shared .align 4 .b8 __wg_main_kernel_0[4096];
// CHECK-DAG: // {{.*}}.shared .align 4 .b8 __wg_main_kernel_1[4096];
// CHECK: st.shared.b32
// CHECK: bar.sync 0;
// CHECK: ld.shared
// CHECK: mul.rn.f32
// CHECK: bar.sync 0;
// CHECK: // ptx @main_kernel_0
// CHECK: // {{.*}}.shared .align 4 .b8 __wg_main_kernel_0[1024];
// CHECK: max.NaN.f32
// CHECK: bar.sync 0;
// CHECK: ld.shared.b32
// CHECK: max.NaN.f32
// CHECK: bar.sync 0;
// CHECK-NOT: // ptx @
func.func @main(%a: !relax.tensor<["m", "k"], f32>, %b: !relax.tensor<["k", "n"], f32>) -> !relax.tensor<["m"], f32> {
  %c = "relax.matmul"(%a, %b) : (!relax.tensor<["m", "k"], f32>, !relax.tensor<["k", "n"], f32>) -> !relax.tensor<["m", "n"], f32>
  %s = "relax.max"(%c) {axes = [1], keepdims = false} : (!relax.tensor<["m", "n"], f32>) -> !relax.tensor<["m"], f32>
  return %s : !relax.tensor<["m"], f32>
}
