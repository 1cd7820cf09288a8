// Every bad command line or I/O error is one line on stderr, never a traceback.
// RUN: not relax-opt %s -o /nonexistent/dir/out.mlir 2>&1 | FileCheck %s --check-prefix=OUT --implicit-check-not=Traceback
// RUN: not relax-opt /nonexistent/in.mlir 2>&1 | FileCheck %s --check-prefix=IN --implicit-check-not=Traceback
// RUN: not relax-opt %s --relax-legalise 2>&1 | FileCheck %s --check-prefix=PASS --implicit-check-not=Traceback
// RUN: not relax-opt %s --canonicalise 2>&1 | FileCheck %s --check-prefix=UPSTREAM --implicit-check-not=Traceback
// RUN: not relax-opt %s --pass-pipeline='builtin.module(relax-infer-shape)' 2>&1 | FileCheck %s --check-prefix=PIPE --implicit-check-not=Traceback
// RUN: not relax-opt %s --pass-pipeline='builtin.module(func.func(relax-infer-shapes))' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NESTED --implicit-check-not=Traceback
// RUN: not relax-opt %s --pass-pipeline='builtin.module(func.func(cse,relax-lower))' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NESTEDPIPE --implicit-check-not=Traceback
// RUN: not relax-opt %s --mlir-print-ir-afer-all 2>&1 | FileCheck %s --check-prefix=FLAG --implicit-check-not=Traceback
// RUN: not relax-opt %s '--pass-pipeline=builtin.module(relax-legalize{ops=relax.nosuch})' 2>&1 | FileCheck %s --check-prefix=OPNAME --implicit-check-not=Traceback
// RUN: not relax-opt %s --relax-legalize=opps=relax.add 2>&1 | FileCheck %s --check-prefix=OPTION --implicit-check-not=Traceback
// RUN: not relax-opt %s -o 2>&1 | FileCheck %s --check-prefix=NOARG --implicit-check-not=Traceback
// RUN: not relax-opt %s --split-input-file=maybe 2>&1 | FileCheck %s --check-prefix=VALUE --implicit-check-not=Traceback
// RUN: not relax-opt %s %s 2>&1 | FileCheck %s --check-prefix=TWO --implicit-check-not=Traceback

// OUT: relax-opt: error: cannot write '/nonexistent/dir/out.mlir': No such file or directory
// IN: relax-opt: error: cannot read '/nonexistent/in.mlir': No such file or directory
// PASS: relax-opt: error: unknown option or pass '--relax-legalise' (did you mean '--relax-legalize'?)
// UPSTREAM: relax-opt: error: unknown option or pass '--canonicalise' (did you mean '--canonicalize'?)
// PIPE: error: unknown pass or pipeline 'relax-infer-shape' (did you mean 'relax-infer-shapes'?)
// NESTED: error: 'relax-infer-shapes' is a relax module pass and cannot be nested under 'func.func':
// NESTED-SAME: name it at the top level (builtin.module(relax-infer-shapes) or --relax-infer-shapes)
// NESTED-NOT: did you mean
// NESTEDPIPE: error: 'relax-lower' is a relax named pipeline of module passes and cannot be nested under
// NESTEDPIPE-SAME: 'func.func': name it at the top level
// FLAG: relax-opt: error: unknown option '--mlir-print-ir-afer-all' (did you mean '--mlir-print-ir-after-all'?)
// OPNAME: relax-opt: error: relax-legalize: unknown op 'relax.nosuch' in ops=
// OPTION: relax-opt: error: relax-legalize has no option 'opps' (did you mean 'ops'?)
// NOARG: relax-opt: error: -o needs a file name
// VALUE: relax-opt: error: option '--split-input-file' takes no value (got 'maybe')
// TWO: relax-opt: error: more than one input file
func.func @f(%x: !relax.tensor<[2], f32>) -> !relax.tensor<[2], f32> {
  return %x : !relax.tensor<[2], f32>
}
