// --relax-print=script: the module as short Python-like text, one line per op (core/script.py).
// RUN: relax-opt %s --split-input-file --relax-infer-shapes --relax-print=script | FileCheck %s
// RUN: relax-opt %s -split-input-file -relax-infer-shapes -relax-print script -o %t && FileCheck %s < %t
// RUN: relax-opt %s --split-input-file --relax-legalize --relax-print=script | FileCheck %s --check-prefix=LEGAL
// RUN: relax-opt %s --split-input-file --relax-infer-shapes --relax-print=mlir | FileCheck %s --check-prefix=MLIR
// RUN: not relax-opt %s --relax-print=scrpit 2>&1 | FileCheck %s --check-prefix=ERR
// RUN: not relax-opt %s --relax-print 2>&1 | FileCheck %s --check-prefix=NOVALUE

// ERR: relax-opt: error: unknown value 'scrpit' for --relax-print (did you mean 'script'?); choices: mlir, script
// ERR-NOT: Traceback
// NOVALUE: relax-opt: error: --relax-print needs a value (mlir, script)
// MLIR: func.func @graph

// A graph function: symbolic dims as expressions, attributes as keyword arguments, every binding
// annotated with its (deduced) type.
// CHECK-LABEL: # symbols: 1 <= n <= 4096
// CHECK-NEXT:  def graph(arg0: Tensor[(n, 4), "f32"], arg1: Tensor[(4, 8), "f32"]) -> Tensor[(8, 2*n + 1), "f32"]:
// CHECK-NEXT:      lv0: Tensor[(n, 8), "f32"] = relax.matmul(arg0, arg1)
// CHECK-NEXT:      lv1: Tensor[(), "f32"] = relax.constant(value=0.5)
// CHECK-NEXT:      lv2: Tensor[(n, 8), "f32"] = relax.add(lv0, lv1)
// CHECK-NEXT:      lv3: Tensor[(2*n, 8), "f32"] = relax.concat(lv2, lv2, axis=0)
// CHECK-NEXT:      lv4: Tensor[(1, 8), "f32"] = relax.constant(value=<f32[1x8] splat 1.0>)
// CHECK-NEXT:      lv5: Tensor[(2*n + 1, 8), "f32"] = relax.concat(lv3, lv4, axis=0)
// CHECK-NEXT:      lv6: Tensor[(8, 2*n + 1), "f32"] = relax.permute_dims(lv5, axes=[1, 0])
// CHECK-NEXT:      lv7: Tensor[(8,), "f32"] = relax.sum(lv6, axes=[1], keepdims=False)
// CHECK-NEXT:      return lv6
// CHECK-EMPTY:
// CHECK-NEXT:  # -----
func.func @graph(%x: !relax.tensor<["n", 4], f32>, %w: !relax.tensor<[4, 8], f32>) -> !relax.tensor<["?", "?"], f32>
    attributes {relax.symbol_bounds = {n = 4096}, relax.symbol_lower = {n = 1}} {
  %0 = "relax.matmul"(%x, %w) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[4, 8], f32>) -> !relax.tensor<["?", "?"], f32>
  %c = "relax.constant"() {value = dense<0.5> : tensor<f32>} : () -> !relax.tensor<[], f32>
  %1 = "relax.add"(%0, %c) : (!relax.tensor<["?", "?"], f32>, !relax.tensor<[], f32>) -> !relax.tensor<["?", "?"], f32>
  %2 = "relax_v.concat"(%1, %1) {axis = 0} : (!relax.tensor<["?", "?"], f32>, !relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  %one = "relax.constant"() {value = dense<1.0> : tensor<1x8xf32>} : () -> !relax.tensor<[1, 8], f32>
  %3 = "relax_v.concat"(%2, %one) {axis = 0} : (!relax.tensor<["?", "?"], f32>, !relax.tensor<[1, 8], f32>) -> !relax.tensor<["?", "?"], f32>
  %4 = "relax.permute_dims"(%3) {axes = [1, 0]} : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  %5 = "relax.sum"(%4) {axes = [1], keepdims = false} : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?"], f32>
  return %4 : !relax.tensor<["?", "?"], f32>
}

// -----

// A dataflow region is a `with dataflow():` block; its result takes the name of what it outputs.
// CHECK-LABEL: def flow(arg0: Tensor[(n, 4), "f32"]) -> Tensor[(n, 4), "f32"]:
// CHECK-NEXT:      with dataflow():
// CHECK-NEXT:          lv0: Tensor[(n, 4), "f32"] = relax.exp(arg0)
// CHECK-NEXT:          lv1: Tensor[(n, 4), "f32"] = relax.negative(lv0)
// CHECK-NEXT:          output(lv1)
// CHECK-NEXT:      lv2: Tensor[(n, 4), "f32"] = relax.reshape(lv1, shape=[n, 4])
// CHECK-NEXT:      return lv2
// CHECK-EMPTY:
// CHECK-NEXT:  # -----
func.func @flow(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %d = "relax_v.dataflow"() ({
    %e = "relax.exp"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
    %n = "relax.negative"(%e) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
    gpu.yield %n : !relax.tensor<["n", 4], f32>
  }) : () -> !relax.tensor<["n", 4], f32>
  %r = "relax.reshape"(%d) {shape = ["n", 4]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  return %r : !relax.tensor<["n", 4], f32>
}

// -----

// Legalized: call_tir with the kernel's name, the arguments as a tuple and the symbolic
// arguments; each kernel is one comment line (signature, op count, dialects).
// CHECK-LABEL: def legal(arg0: Tensor[(n, 4), "f32"]) -> Tensor[(n, 4), "f32"]:
// CHECK-NEXT:      lv0: Tensor[(n, 4), "f32"] = relax.relu(arg0)
// CHECK-NEXT:      lv1: Tensor[(n,), "i32"] = relax.arange(dtype="i32", end=n)
// CHECK-NEXT:      return lv0
// LEGAL-LABEL: def legal(arg0: Tensor[(n, 4), "f32"]) -> Tensor[(n, 4), "f32"]:
// LEGAL-NEXT:      lv0: Tensor[(n, 4), "f32"] = relax.call_tir(relu, (arg0,))
// LEGAL-NEXT:      lv1: Tensor[(n,), "i32"] = relax.call_tir(arange, ())
// LEGAL-NEXT:      return lv0
// LEGAL-EMPTY:
// LEGAL-NEXT:  # kernel relu(f32[?x4], f32[?x4]) -> f32[?x4]: {{[0-9]+}} ops (arith, linalg)
// LEGAL-NEXT:  # kernel arange(i32[?]) -> i32[?]: {{[0-9]+}} ops (arith, linalg)
func.func @legal(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %0 = "relax.relu"(%x) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %1 = "relax.arange"() {end = "n", dtype = i32} : () -> !relax.tensor<["n"], i32>
  return %0 : !relax.tensor<["n", 4], f32>
}

// -----

// A call_tir written by hand: symbolic arguments as sym_args=[...], a multi-result op with its
// types in a comment, upstream ops in short form.
// CHECK-LABEL: def called(arg0: Tensor[(n, 4), "f32"]) -> Tensor[(2*n, 4), "f32"]:
// CHECK-NEXT:      lv0: Tensor[(2*n, 4), "f32"] = relax.call_tir(twice, (arg0,), sym_args=[2*n])
// CHECK-NEXT:      lv1, lv2 = relax.split(lv0, axis=0, sections=2)  # Tensor[(n, 4), "f32"], Tensor[(n, 4), "f32"]
// CHECK-NEXT:      lv3: index = arith.constant(value=0)
// CHECK-NEXT:      return lv0
// CHECK-EMPTY:
// CHECK-NEXT:  # kernel twice(f32[?x4], f32[?x4], index) -> f32[?x4]: 0 ops
func.func @called(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["2*n", 4], f32> {
  %0 = "relax_v.call_tir"(%x) {callee = @twice, sym_args = ["2*n"]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["2*n", 4], f32>
  %1:2 = "relax_v.split"(%0) {axis = 0, sections = 2} : (!relax.tensor<["2*n", 4], f32>) -> (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>)
  %c = arith.constant 0 : index
  return %0 : !relax.tensor<["2*n", 4], f32>
}
func.func private @twice(%a: tensor<?x4xf32>, %o: tensor<?x4xf32>, %n: index) -> tensor<?x4xf32> attributes {relax.kernel = "twice"} {
  return %o : tensor<?x4xf32>
}
