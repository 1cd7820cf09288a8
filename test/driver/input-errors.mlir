// Inputs that are not one well-formed module: every error names the real file and a line:col.
//
// Not UTF-8: located at the first bad byte.
// RUN: printf 'func.func @f() {\n  \377 return\n}\n' > %t.bad.mlir
// RUN: not relax-opt %t.bad.mlir 2>&1 | FileCheck %s --check-prefix=UTF8 -DFILE=%t.bad.mlir
// UTF8: [[FILE]]:2:3: error: the input is not valid UTF-8 (byte 0xff)
// UTF8-NOT: Traceback
//
// A string element in a literal of integers: MLIR's parser asserted and aborted the process
// (malformed-IR fuzzer seed 53055); a located error before parsing. A string element type takes strings.
// RUN: printf 'func.func @f() -> tensor<2xi32> {\n  %%%%c = arith.constant dense<[0, "n*"]> : tensor<2xi32>\n  return %%%%c : tensor<2xi32>\n}\n' > %t.dense.mlir
// RUN: not relax-opt %t.dense.mlir 2>&1 | FileCheck %s --check-prefix=DENSE -DFILE=%t.dense.mlir
// DENSE: [[FILE]]:2:33: error: a string element in a literal of i32 elements (integers expected): refused before parsing
// RUN: printf '"test.op"() {a = dense<["x>", "y"]> : tensor<2x!t.str>} : () -> ()\n' > %t.str.mlir
// RUN: relax-opt --allow-unregistered-dialect %t.str.mlir | FileCheck %s --check-prefix=STR
// STR: dense<["x>", "y"]> : tensor<2x!t.str>
//
// Two top-level functions without `module {}`: an implicit module, as mlir-opt does.
// RUN: printf 'func.func @f() {\n  return\n}\nfunc.func @g() {\n  return\n}\n' > %t.two.mlir
// RUN: relax-opt %t.two.mlir | FileCheck %s --check-prefix=TWO
// TWO: module {
// TWO: func.func @f()
// TWO: func.func @g()
//
// Errors in an implicit module still name the file.
// RUN: printf 'func.func @f() {\n  return\n}\nfunc.func @g(%%%%x: !relax.tensor<[-1], f32>) {\n  return\n}\n' > %t.twobad.mlir
// RUN: not relax-opt %t.twobad.mlir 2>&1 | FileCheck %s --check-prefix=TWOBAD -DFILE=%t.twobad.mlir
// TWOBAD: [[FILE]]:4:1: error: 'func.func' op invalid type !relax.tensor<[-1], f32>: has a negative dim -1
//
// Empty input: an empty module.
// RUN: printf '' | relax-opt | FileCheck %s --check-prefix=EMPTY
// EMPTY: module {
//
// An IRDL op in custom form (the MLIR parser fails without a message): located at the op.
// RUN: printf 'func.func @f(%%%%x: !relax.tensor<[4], f32>) {\n  %%%%0 = relax.exp(%%%%x) : (!relax.tensor<[4], f32>) -> !relax.tensor<[4], f32>\n  return\n}\n' > %t.custom.mlir
// RUN: not relax-opt %t.custom.mlir 2>&1 | FileCheck %s --check-prefix=CUSTOM -DFILE=%t.custom.mlir
// CUSTOM: [[FILE]]:2:8: error: custom assembly form of 'relax.exp' is not supported
//
// The same through the importer: not UTF-8, and the real file name in a parse error.
// RUN: not relax-import-stablehlo %t.bad.mlir 2>&1 | FileCheck %s --check-prefix=UTF8 -DFILE=%t.bad.mlir
// RUN: printf 'func.func public @main(%%%%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  %%%%0 = stablehlo.add %%%%arg0 : tensor<4xf32>\n  return %%%%0 : tensor<4xf32>\n}\n' > %t.shlo.mlir
// RUN: not relax-import-stablehlo %t.shlo.mlir 2>&1 | FileCheck %s --check-prefix=SHLO -DFILE=%t.shlo.mlir
// SHLO: [[FILE]]:2:{{[0-9]+}}: error:
// SHLO-NOT: "-"
