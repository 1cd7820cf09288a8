// Single- and double-dash flags, as in mlir-opt; IR printing; threading; -o.
// RUN: relax-opt %s -split-input-file -pass-pipeline='builtin.module(relax-infer-shapes)' | FileCheck %s
// RUN: relax-opt %s --split-input-file --pass-pipeline 'builtin.module(relax-infer-shapes)' | FileCheck %s
// RUN: relax-opt %s -split-input-file -relax-infer-shapes -mlir-disable-threading | FileCheck %s
// RUN: relax-opt %s -split-input-file --relax-infer-shapes -o %t && FileCheck %s < %t
// RUN: relax-opt %s -split-input-file --relax-infer-shapes -o=%t2 && FileCheck %s < %t2
// RUN: relax-opt %s --split-input-file --mlir-print-ir-before-all --relax-infer-shapes 2>&1 >/dev/null | FileCheck %s --check-prefix=BEFORE
// RUN: relax-opt %s -split-input-file -mlir-print-ir-after-all --relax-infer-shapes 2>&1 >/dev/null | FileCheck %s --check-prefix=AFTER
// RUN: relax-opt %s --split-input-file --mlir-print-ir-after-change --relax-infer-shapes --relax-dce 2>&1 >/dev/null | FileCheck %s --check-prefix=CHANGE
// RUN: relax-opt %s -split-input-file --mlir-print-ir-after-failure --relax-infer-shapes | FileCheck %s
// RUN: relax-opt %s --split-input-file --mlir-timing --relax-infer-shapes 2>&1 >/dev/null | FileCheck %s --check-prefix=TIMING

// CHECK-LABEL: func.func @relu
// CHECK-SAME:  -> !relax.tensor<["n", 4], f32>
// CHECK:       // -----
// CHECK-LABEL: func.func @second
// BEFORE: IR Dump Before InferShapesPass (relax-infer-shapes)
// BEFORE: "relax.relu"
// AFTER: IR Dump After InferShapesPass (relax-infer-shapes)
// AFTER: !relax.tensor<["n", 4], f32>
// CHANGE: IR Dump After InferShapesPass (relax-infer-shapes)
// CHANGE-NOT: IR Dump After DcePass
// TIMING: Execution time report
// TIMING: InferShapesPass
func.func @relu(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["?", "?"], f32> {
  %0 = "relax.relu"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["?", "?"], f32>
  return %0 : !relax.tensor<["?", "?"], f32>
}

// -----

func.func @second(%x: !relax.tensor<[2], f32>) -> !relax.tensor<[2], f32> {
  return %x : !relax.tensor<[2], f32>
}
