// mlir-opt's bytecode, pipeline-dump, statistics and IRDL flags.
// Bytecode out and back in: the relax types and the source locations survive the round trip.
// RUN: relax-opt %s --relax-infer-shapes --emit-bytecode -o %t.mlirbc
// RUN: relax-opt %t.mlirbc --mlir-print-debuginfo | FileCheck %s --check-prefixes=BC,LOC
// RUN: relax-opt %s --emit-bytecode | relax-opt --relax-infer-shapes | FileCheck %s --check-prefix=BC
// RUN: head -c 120 %t.mlirbc > %t.cut.mlirbc
// RUN: not relax-opt %t.cut.mlirbc 2>&1 | FileCheck %s --check-prefix=CUT
// RUN: not relax-opt %t.mlirbc --split-input-file 2>&1 | FileCheck %s --check-prefix=BCSPLIT
// RUN: not relax-opt %s --emit-bytecode --split-input-file 2>&1 | FileCheck %s --check-prefix=EMITSPLIT
// A failing pass on bytecode input points into the original source.
// RUN: not relax-opt %t.mlirbc --relax-to-upstream 2>&1 | FileCheck %s --check-prefix=BCLOC
//
// RUN: relax-opt %s --dump-pass-pipeline --relax-infer-shapes --canonicalize -o /dev/null 2>&1 | FileCheck %s --check-prefix=DUMP
// RUN: relax-opt %s --relax-infer-shapes --cse --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS
// RUN: relax-opt %s --cse --mlir-pass-statistics --mlir-pass-statistics-display=list -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS
// RUN: not relax-opt %s --mlir-pass-statistics-display=tree 2>&1 | FileCheck %s --check-prefix=BADDISPLAY
// mlir-opt's --verify-each (on by default; =false is --no-verify)
// RUN: relax-opt %s --verify-each=false --relax-infer-shapes | FileCheck %s --check-prefix=BC
// RUN: relax-opt %s --verify-each --relax-infer-shapes | FileCheck %s --check-prefix=BC
// RUN: not relax-opt %s --verify-each=maybe 2>&1 | FileCheck %s --check-prefix=BADVERIFY
//
// RUN: relax-opt %S/Inputs/cmath-use.mlir --irdl-file=%S/Inputs/cmath.irdl.mlir | FileCheck %s --check-prefix=IRDL
// RUN: not relax-opt %S/Inputs/cmath-use.mlir 2>&1 | FileCheck %s --check-prefix=NOIRDL
// RUN: not relax-opt %S/Inputs/cmath-use.mlir --irdl-file %S/Inputs/cmath-twice.irdl.mlir 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not relax-opt %S/Inputs/cmath-twice.irdl.mlir 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not relax-opt %s --irdl-file %relax_irdl 2>&1 | FileCheck %s --check-prefix=LOADED
// RUN: not relax-opt %s --irdl-file %s 2>&1 | FileCheck %s --check-prefix=NOTIRDL
// RUN: not relax-opt %s --irdl-file %t.missing 2>&1 | FileCheck %s --check-prefix=MISSING

// BADVERIFY: option '--verify-each' takes true or false (got 'maybe')
// BC-LABEL: func.func @f
// BC: "relax.exp"({{.*}}) : (!relax.tensor<["n"], f32>) -> !relax.tensor<["n"], f32>
// LOC: loc("{{.*}}relax-opt-mlir-opt-parity.mlir":[[@LINE+12]]:8)
// CUT: error: {{.*}}bytes
// BCSPLIT: --split-input-file needs a text input; {{.*}} is MLIR bytecode
// EMITSPLIT: --emit-bytecode cannot be combined with --split-input-file
// BCLOC: relax-opt-mlir-opt-parity.mlir:[[@LINE+8]]:8: error: 'relax.exp' op has no upstream lowering
// DUMP: Pass Manager with 2 passes:
// DUMP-NEXT: builtin.module(relax-infer-shapes,canonicalize{
// STATS: Pass statistics report
// STATS: num-cse'd - Number of operations CSE'd
// BADDISPLAY: unknown value 'tree' for --mlir-pass-statistics-display; choices: list, pipeline

func.func @f(%x: !relax.tensor<["n"], f32>) -> !relax.tensor<["?"], f32> {
  %0 = "relax.exp"(%x) : (!relax.tensor<["n"], f32>) -> !relax.tensor<["?"], f32>
  return %0 : !relax.tensor<["?"], f32>
}

// IRDL: func.func @g(%{{.*}}: !cmath.complex<f32>) -> f32
// IRDL: "cmath.norm"
// NOIRDL: cmath-use.mlir:2:8: error: unregistered operation 'cmath.norm'
// TWICE: cmath-twice.irdl.mlir:7:1: error: dialect 'cmath' is defined twice
// LOADED: relax.irdl.mlir:{{[0-9]+}}:1: error: dialect 'relax' is already loaded
// NOTIRDL: relax-opt-mlir-opt-parity.mlir:[[@LINE-10]]:1: error: 'func.func' at the top level of an IRDL file (expected irdl.dialect)
// MISSING: relax-opt: error: cannot read '{{.*}}.missing'

// Printing and listing flags.
// RUN: relax-opt --show-dialects | FileCheck %s --check-prefix=DIALECTS
// RUN: relax-opt %s --mlir-print-local-scope --mlir-print-debuginfo --mlir-pretty-debuginfo | FileCheck %s --check-prefix=PRETTY
// RUN: relax-opt %s --relax-infer-shapes --mlir-print-ir-tree-dir=%t.tree -o /dev/null && ls %t.tree/* | FileCheck %s --check-prefix=TREE
// RUN: not relax-opt %s --mlir-elide-elementsattrs-if-larger=many 2>&1 | FileCheck %s --check-prefix=ELIDEBAD
// DIALECTS: Available Dialects: {{.*}}arith,{{.*}}linalg,{{.*}}relax,relax_v,{{.*}}vector
// PRETTY: "relax.exp"(%arg0) : (!relax.tensor<["n"], f32>) -> !relax.tensor<["?"], f32> {{.*}}relax-opt-mlir-opt-parity.mlir:
// TREE: relax-infer-shapes.mlir
// ELIDEBAD: --mlir-elide-elementsattrs-if-larger takes a number of elements >= 0 (got 'many')
