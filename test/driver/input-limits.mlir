// Input that stock mlir-opt accepts wrongly or crashes on gets a located error here.
//
// Ops of a dialect that is not loaded are refused (as mlir-opt without
// --allow-unregistered-dialect), even with no pass to run:
// RUN: not relax-opt %s 2>&1 | FileCheck %s --check-prefix=UNREG --implicit-check-not=Traceback
// RUN: relax-opt %s --allow-unregistered-dialect | FileCheck %s --check-prefix=ALLOW
// UNREG: input-limits.mlir:[[@LINE+5]]:3: error: unregistered operation 'foo.bar' (its dialect is not loaded; --allow-unregistered-dialect accepts it)
// UNREG-NOT: error
// ALLOW: "foo.bar"() : () -> ()

func.func @f() {
  "foo.bar"() : () -> ()
  return
}

// Nesting deeper than MLIR's recursive parser can take (3000 regions or a 100000-deep array
// attribute overflowed the C stack: a segfault) is refused before parsing, located:
// RUN: %python -c "print('func.func @g() attributes {a = ' + '[' * 100000 + '1' + ']' * 100000 + '} {\n  return\n}')" \
// RUN:   | not relax-opt - 2>&1 | FileCheck %s --check-prefix=DEEP --implicit-check-not=Traceback
// DEEP: <stdin>:1:1031: error: the input nests deeper than 1000 brackets here (regions, attributes or types): refused before parsing
// RUN: %python -c "print('module {' + '\n'.join('func.func @f%d() attributes {a = [' % i + '[' * 900 + ']' * 900 + ']} { return }' for i in range(3)) + '}')" \
// RUN:   | relax-opt - --allow-unregistered-dialect | FileCheck %s --check-prefix=WIDE
// WIDE: func.func @f2()

// A use of result #2147483648: MLIR's parser sizes the result list by the number first (out of
// memory: relax-opt aborted, relax-import-stablehlo raised MemoryError; malformed-IR seed 64500):
// RUN: printf 'func.func @r(%%%%a: !relax.tensor<[2], f32>) -> !relax.tensor<[2], f32> {\n  %%%%0 = "relax.add"(%%%%a, %%%%a) : (!relax.tensor<[2], f32>, !relax.tensor<[2], f32>) -> !relax.tensor<[2], f32>\n  return %%%%0#2147483648 : !relax.tensor<[2], f32>\n}\n' > %t.resno.mlir
// RUN: not relax-opt %t.resno.mlir 2>&1 | FileCheck %s --check-prefix=RESNO --implicit-check-not=Traceback
// RUN: not relax-import-stablehlo %t.resno.mlir 2>&1 | FileCheck %s --check-prefix=RESNO --implicit-check-not=Traceback
// RESNO: resno.mlir:3:10: error: result number 2147483648 is out of range (at most 1048576): refused before parsing

// A string whose hex escapes make bytes that are not UTF-8: an op name made of them reached
// Python in a diagnostic and the bindings terminated the process (fuzzer seed 53054).
// RUN: printf 'func.func @f() {\n  "rel\\FFx.max"() : () -> ()\n  return\n}\n' > %t.badutf8.mlir
// RUN: not relax-opt %t.badutf8.mlir 2>&1 | FileCheck %s --check-prefix=BADUTF8
// BADUTF8: badutf8.mlir:2:3: error: a string whose escapes make bytes that are not UTF-8
