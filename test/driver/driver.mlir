// RUN: relax-opt --list-passes | FileCheck %s --check-prefix=LIST
// RUN: relax-opt --version | FileCheck %s --check-prefix=VERSION
// RUN: relax-opt %s --pass-pipeline='builtin.module(relax-infer-shapes,canonicalize,relax-legalize{ops=relax.exp})' | FileCheck %s
// RUN: not relax-opt %s --pass-pipeline='builtin.module(relax-legalize{bogus=1})' 2>&1 | FileCheck %s --check-prefix=BADOPT
// RUN: echo 'func.func @f(%x: !relax.tensor<["n"], f32> {' | not relax-opt 2>&1 | FileCheck %s --check-prefix=SYNTAX

// RUN: relax-opt %s --relax-infer-shapes --mlir-print-ir-after-all -o /dev/null 2>&1 | FileCheck %s --check-prefix=AFTER
// AFTER: IR Dump After InferShapesPass
// LIST: --relax-infer-shapes
// LIST: --relax-legalize
// LIST: --relax-lower-shapes
// LIST: --relax-to-upstream
// VERSION: relax-opt 0.1.0
// BADOPT: relax-legalize has no option 'bogus'
// SYNTAX: <stdin>:1:{{[0-9]+}}: error: expected

// CHECK-LABEL: func.func @f
// CHECK: "relax_v.call_tir"(%{{.*}}) {callee = @exp}
func.func @f(%x: !relax.tensor<["n"], f32>) -> !relax.tensor<["?"], f32> {
  %0 = "relax.exp"(%x) : (!relax.tensor<["n"], f32>) -> !relax.tensor<["?"], f32>
  return %0 : !relax.tensor<["?"], f32>
}
