// A backend stage pass runs on the output of relax-to-upstream. On relax graph IR it says so at
// the first relax op (as relax-to-upstream says "run relax-legalize first"), not with a raw
// failure from inside an upstream pipeline ("internal error in ...: LoweringError ...").
// RUN: not relax-opt %s --relax-cpu-lower 2>&1 \
// RUN:   | FileCheck %s -DPASS=relax-cpu-lower --implicit-check-not=internal
// RUN: not relax-opt %s --relax-cpu-bufferize 2>&1 \
// RUN:   | FileCheck %s -DPASS=relax-cpu-bufferize --implicit-check-not=internal
// RUN: not relax-opt %s --relax-cpu-vectorize 2>&1 \
// RUN:   | FileCheck %s -DPASS=relax-cpu-vectorize --implicit-check-not=internal
// RUN: not relax-opt %s --relax-cpu-row-masks 2>&1 \
// RUN:   | FileCheck %s -DPASS=relax-cpu-row-masks --implicit-check-not=internal
// RUN: not relax-opt %s --relax-gpu-map 2>&1 \
// RUN:   | FileCheck %s -DPASS=relax-gpu-map --implicit-check-not=internal
// RUN: not relax-opt %s --relax-gpu-bufferize 2>&1 \
// RUN:   | FileCheck %s -DPASS=relax-gpu-bufferize --implicit-check-not=internal
// RUN: not relax-opt %s --relax-gpu-to-ptx 2>&1 \
// RUN:   | FileCheck %s -DPASS=relax-gpu-to-ptx --implicit-check-not=internal
// RUN: not relax-opt %s --relax-spirv-map 2>&1 \
// RUN:   | FileCheck %s -DPASS=relax-spirv-map --implicit-check-not=internal
// RUN: not relax-opt %s --relax-to-spirv 2>&1 \
// RUN:   | FileCheck %s -DPASS=relax-to-spirv --implicit-check-not=internal
// After relax-legalize the graph still holds relax ops (call_tir): the same diagnostic.
// RUN: not relax-opt %s --relax-legalize --relax-cpu-lower 2>&1 \
// RUN:   | FileCheck %s --check-prefix=LEGAL --implicit-check-not=internal
// RUN: relax-opt %s --relax-lower --relax-cpu-lower | FileCheck %s --check-prefix=OK

// CHECK: relax-opt-stage-order.mlir:[[@LINE+10]]:8: error: 'relax.matmul' op is relax graph IR:
// CHECK-SAME: [[PASS]] runs on upstream dialects only; run relax-to-upstream first
// CHECK-SAME: (the named pipelines relax-lower or relax-compile-<target> end with it)
// LEGAL: error: 'relax_v.call_tir' op is relax graph IR: relax-cpu-lower runs on upstream dialects only;
// LEGAL-SAME: run relax-to-upstream first
// OK-NOT: "relax.matmul"
// OK: llvm.func internal @main(
// OK: llvm.func internal @__relax_kernel_matmul(
func.func @main(%x: !relax.tensor<["n", 64], f32>,
                %w: !relax.tensor<[64, 32], f32>) -> !relax.tensor<["n", 32], f32> {
  %0 = "relax.matmul"(%x, %w)
      : (!relax.tensor<["n", 64], f32>, !relax.tensor<[64, 32], f32>) -> !relax.tensor<["n", 32], f32>
  return %0 : !relax.tensor<["n", 32], f32>
}
