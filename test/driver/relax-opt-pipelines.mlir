// Named pipelines (what compile() runs) and --list-passes with options.
// RUN: relax-opt %s --pass-pipeline='builtin.module(relax-compile-cpu)' | FileCheck %s
// RUN: relax-opt %s --relax-optimize | FileCheck %s
// RUN: relax-opt %s -relax-lower | FileCheck %s
// RUN: relax-opt --list-passes | FileCheck %s --check-prefix=LIST
// RUN: relax-opt -list-passes | FileCheck %s --check-prefix=LIST
// RUN: not relax-opt %s --relax-optimize=x=1 2>&1 | FileCheck %s --check-prefix=NOOPT --implicit-check-not=Traceback

// CHECK-LABEL: func.func @main
// CHECK-NOT: "relax.relu"
// LIST: Relax passes:
// LIST: --relax-legalize
// LIST-NEXT: Replace graph ops by relax.call_tir
// LIST-NEXT: ops=str (default ): comma-separated op names
// LIST-NEXT: skip=str
// LIST: Named pipelines:
// LIST: --relax-compile-cpu
// LIST: = relax-infer-shapes,relax-conv-to-matmul,relax-canonicalize,relax-fuse-attention,relax-
// LIST: --relax-optimize
// NOOPT: relax-opt: error: named pipeline 'relax-optimize' takes no options
func.func @main(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %0 = "relax.relu"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  return %0 : !relax.tensor<["n", 4], f32>
}
