"""CPU backend: stages, vectorization, JIT numerics against numpy, threads."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from mlir import ir

from relax_mlir.backend import cpu

# --------------------------------------------------------------------------------------------
# Fixtures: modules in the relax-to-upstream contract (kernels on tensors, entries on memrefs).
# --------------------------------------------------------------------------------------------

ADD_RELU = """
func.func private @add_relu(%x: tensor<?x64xf32>, %b: tensor<64xf32>, %o: tensor<?x64xf32>, %n: index) -> tensor<?x64xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<?x64xf32>, tensor<64xf32>) outs(%o : tensor<?x64xf32>) {
  ^bb0(%a: f32, %c: f32, %out: f32):
    %s = arith.addf %a, %c : f32
    %z = arith.constant 0.0 : f32
    %m = arith.maximumf %s, %z : f32
    linalg.yield %m : f32
  } -> tensor<?x64xf32>
  return %r : tensor<?x64xf32>
}
func.func @main(%in0: memref<?x64xf32>, %in1: memref<64xf32>, %out0: memref<?x64xf32>, %err: memref<1xi32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %t0 = bufferization.to_tensor %in0 restrict : memref<?x64xf32> to tensor<?x64xf32>
  %t1 = bufferization.to_tensor %in1 restrict : memref<64xf32> to tensor<64xf32>
  %n = tensor.dim %t0, %c0 : tensor<?x64xf32>
  %n2 = memref.dim %out0, %c0 : memref<?x64xf32>
  %ok = arith.cmpi eq, %n, %n2 : index
  scf.if %ok {
    %e = tensor.empty(%n) : tensor<?x64xf32>
    %r = func.call @add_relu(%t0, %t1, %e, %n) : (tensor<?x64xf32>, tensor<64xf32>, tensor<?x64xf32>, index) -> tensor<?x64xf32>
    bufferization.materialize_in_destination %r in restrict writable %out0 : (tensor<?x64xf32>, memref<?x64xf32>) -> ()
  } else {
    %code = arith.constant 1 : i32
    memref.store %code, %err[%c0] : memref<1xi32>
  }
  return
}
"""

# Row sum over a dynamic reduction dim (peeled vector tiles plus a scalar remainder).
ROW_SUM = """
func.func private @row_sum(%x: tensor<?x?xf32>, %o: tensor<?xf32>, %n: index, %k: index) -> tensor<?xf32> {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%o : tensor<?xf32>) -> tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x?xf32>) outs(%f : tensor<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
func.func @main(%in0: memref<?x?xf32>, %out0: memref<?xf32>, %err: memref<1xi32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %t0 = bufferization.to_tensor %in0 restrict : memref<?x?xf32> to tensor<?x?xf32>
  %n = tensor.dim %t0, %c0 : tensor<?x?xf32>
  %k = tensor.dim %t0, %c1 : tensor<?x?xf32>
  %n2 = memref.dim %out0, %c0 : memref<?xf32>
  %ok = arith.cmpi eq, %n, %n2 : index
  scf.if %ok {
    %e = tensor.empty(%n) : tensor<?xf32>
    %r = func.call @row_sum(%t0, %e, %n, %k) : (tensor<?x?xf32>, tensor<?xf32>, index, index) -> tensor<?xf32>
    bufferization.materialize_in_destination %r in restrict writable %out0 : (tensor<?xf32>, memref<?xf32>) -> ()
  } else {
    %code = arith.constant 1 : i32
    memref.store %code, %err[%c0] : memref<1xi32>
  }
  return
}
"""

# Softmax-like: kernel 1 row max (into a temporary), kernel 2 exp(x - max) / 1 broadcast.
SOFTMAX_LIKE = """
func.func private @row_max(%x: tensor<?x32xf32>, %o: tensor<?xf32>, %n: index) -> tensor<?xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %f = linalg.fill ins(%ninf : f32) outs(%o : tensor<?xf32>) -> tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x32xf32>) outs(%f : tensor<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %m = arith.maximumf %a, %acc : f32
    linalg.yield %m : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
func.func private @exp_sub(%x: tensor<?x32xf32>, %m: tensor<?xf32>, %o: tensor<?x32xf32>, %n: index) -> tensor<?x32xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : tensor<?x32xf32>, tensor<?xf32>) outs(%o : tensor<?x32xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %d = arith.subf %a, %b : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  } -> tensor<?x32xf32>
  return %r : tensor<?x32xf32>
}
func.func @main(%in0: memref<?x32xf32>, %out0: memref<?x32xf32>, %err: memref<1xi32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %t0 = bufferization.to_tensor %in0 restrict : memref<?x32xf32> to tensor<?x32xf32>
  %n = tensor.dim %t0, %c0 : tensor<?x32xf32>
  %n2 = memref.dim %out0, %c0 : memref<?x32xf32>
  %ok = arith.cmpi eq, %n, %n2 : index
  scf.if %ok {
    %e0 = tensor.empty(%n) : tensor<?xf32>
    %m = func.call @row_max(%t0, %e0, %n) : (tensor<?x32xf32>, tensor<?xf32>, index) -> tensor<?xf32>
    %e1 = tensor.empty(%n) : tensor<?x32xf32>
    %r = func.call @exp_sub(%t0, %m, %e1, %n) : (tensor<?x32xf32>, tensor<?xf32>, tensor<?x32xf32>, index) -> tensor<?x32xf32>
    bufferization.materialize_in_destination %r in restrict writable %out0 : (tensor<?x32xf32>, memref<?x32xf32>) -> ()
  } else {
    %code = arith.constant 1 : i32
    memref.store %code, %err[%c0] : memref<1xi32>
  }
  return
}
"""

# C = A @ B + bias with M, K dynamic and N = 40 static (a partial 16-wide tile).
MATMUL_BIAS = """
func.func private @mm(%a: tensor<?x?xf32>, %b: tensor<?x40xf32>, %o: tensor<?x40xf32>, %m: index, %k: index) -> tensor<?x40xf32> {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%o : tensor<?x40xf32>) -> tensor<?x40xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x?xf32>, tensor<?x40xf32>) outs(%f : tensor<?x40xf32>) -> tensor<?x40xf32>
  return %r : tensor<?x40xf32>
}
func.func private @bias(%x: tensor<?x40xf32>, %b: tensor<40xf32>, %o: tensor<?x40xf32>, %m: index) -> tensor<?x40xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<?x40xf32>, tensor<40xf32>) outs(%o : tensor<?x40xf32>) {
  ^bb0(%p: f32, %q: f32, %out: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<?x40xf32>
  return %r : tensor<?x40xf32>
}
func.func @main(%in0: memref<?x?xf32>, %in1: memref<?x40xf32>, %in2: memref<40xf32>, %out0: memref<?x40xf32>, %err: memref<1xi32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %a = bufferization.to_tensor %in0 restrict : memref<?x?xf32> to tensor<?x?xf32>
  %b = bufferization.to_tensor %in1 restrict : memref<?x40xf32> to tensor<?x40xf32>
  %bias = bufferization.to_tensor %in2 restrict : memref<40xf32> to tensor<40xf32>
  %m = tensor.dim %a, %c0 : tensor<?x?xf32>
  %k = tensor.dim %a, %c1 : tensor<?x?xf32>
  %k2 = tensor.dim %b, %c0 : tensor<?x40xf32>
  %m2 = memref.dim %out0, %c0 : memref<?x40xf32>
  %ok0 = arith.cmpi eq, %k, %k2 : index
  %ok1 = arith.cmpi eq, %m, %m2 : index
  %ok = arith.andi %ok0, %ok1 : i1
  scf.if %ok {
    %e0 = tensor.empty(%m) : tensor<?x40xf32>
    %p = func.call @mm(%a, %b, %e0, %m, %k) : (tensor<?x?xf32>, tensor<?x40xf32>, tensor<?x40xf32>, index, index) -> tensor<?x40xf32>
    %e1 = tensor.empty(%m) : tensor<?x40xf32>
    %r = func.call @bias(%p, %bias, %e1, %m) : (tensor<?x40xf32>, tensor<40xf32>, tensor<?x40xf32>, index) -> tensor<?x40xf32>
    bufferization.materialize_in_destination %r in restrict writable %out0 : (tensor<?x40xf32>, memref<?x40xf32>) -> ()
  } else {
    %code = arith.constant 2 : i32
    memref.store %code, %err[%c0] : memref<1xi32>
  }
  return
}
"""

# A plain [fill +] matmul kernel, M dynamic: the shape backend/cpu_matmul.py schedules.
MATMUL = """
func.func private @mm(%a: tensor<?x64xf32>, %b: tensor<64x48xf32>, %o: tensor<?x48xf32>, %m: index) -> tensor<?x48xf32> {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%o : tensor<?x48xf32>) -> tensor<?x48xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x64xf32>, tensor<64x48xf32>) outs(%f : tensor<?x48xf32>) -> tensor<?x48xf32>
  return %r : tensor<?x48xf32>
}
func.func @main(%in0: memref<?x64xf32>, %in1: memref<64x48xf32>, %out0: memref<?x48xf32>, %err: memref<1xi32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %a = bufferization.to_tensor %in0 restrict : memref<?x64xf32> to tensor<?x64xf32>
  %b = bufferization.to_tensor %in1 restrict : memref<64x48xf32> to tensor<64x48xf32>
  %m = tensor.dim %a, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%m) : tensor<?x48xf32>
  %r = func.call @mm(%a, %b, %e, %m) : (tensor<?x64xf32>, tensor<64x48xf32>, tensor<?x48xf32>, index) -> tensor<?x48xf32>
  bufferization.materialize_in_destination %r in restrict writable %out0 : (tensor<?x48xf32>, memref<?x48xf32>) -> ()
  return
}
"""

# Three kernels, two temporaries (t1 used twice): t1 = x * y; cs = column sums of t1;
# out = t1 - cs (broadcast over rows). Both dims dynamic.
CHAIN3 = """
func.func private @mul(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>, %o: tensor<?x?xf32>, %n: index, %m: index) -> tensor<?x?xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<?x?xf32>, tensor<?x?xf32>) outs(%o : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %p = arith.mulf %a, %b : f32
    linalg.yield %p : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
func.func private @col_sum(%x: tensor<?x?xf32>, %o: tensor<?xf32>, %n: index, %m: index) -> tensor<?xf32> {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%o : tensor<?xf32>) -> tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>],
                       iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<?x?xf32>) outs(%f : tensor<?xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
func.func private @sub_bcast(%x: tensor<?x?xf32>, %c: tensor<?xf32>, %o: tensor<?x?xf32>, %n: index, %m: index) -> tensor<?x?xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %c : tensor<?x?xf32>, tensor<?xf32>) outs(%o : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %d = arith.subf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
func.func @main(%in0: memref<?x?xf32>, %in1: memref<?x?xf32>, %out0: memref<?x?xf32>, %err: memref<1xi32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = bufferization.to_tensor %in0 restrict : memref<?x?xf32> to tensor<?x?xf32>
  %y = bufferization.to_tensor %in1 restrict : memref<?x?xf32> to tensor<?x?xf32>
  %n = tensor.dim %x, %c0 : tensor<?x?xf32>
  %m = tensor.dim %x, %c1 : tensor<?x?xf32>
  %yn = tensor.dim %y, %c0 : tensor<?x?xf32>
  %ym = tensor.dim %y, %c1 : tensor<?x?xf32>
  %on = memref.dim %out0, %c0 : memref<?x?xf32>
  %om = memref.dim %out0, %c1 : memref<?x?xf32>
  %a0 = arith.cmpi eq, %n, %yn : index
  %a1 = arith.cmpi eq, %m, %ym : index
  %a2 = arith.cmpi eq, %n, %on : index
  %a3 = arith.cmpi eq, %m, %om : index
  %b0 = arith.andi %a0, %a1 : i1
  %b1 = arith.andi %a2, %a3 : i1
  %ok = arith.andi %b0, %b1 : i1
  scf.if %ok {
    %e0 = tensor.empty(%n, %m) : tensor<?x?xf32>
    %t1 = func.call @mul(%x, %y, %e0, %n, %m) : (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, index, index) -> tensor<?x?xf32>
    %e1 = tensor.empty(%m) : tensor<?xf32>
    %cs = func.call @col_sum(%t1, %e1, %n, %m) : (tensor<?x?xf32>, tensor<?xf32>, index, index) -> tensor<?xf32>
    %e2 = tensor.empty(%n, %m) : tensor<?x?xf32>
    %r = func.call @sub_bcast(%t1, %cs, %e2, %n, %m) : (tensor<?x?xf32>, tensor<?xf32>, tensor<?x?xf32>, index, index) -> tensor<?x?xf32>
    bufferization.materialize_in_destination %r in restrict writable %out0 : (tensor<?x?xf32>, memref<?x?xf32>) -> ()
  } else {
    %code = arith.constant 3 : i32
    memref.store %code, %err[%c0] : memref<1xi32>
  }
  return
}
"""

# One module, several entries: every element type of the contract, i1 in and out, a rank-0
# result.
DTYPES = """
func.func private @axpy_f16(%x: tensor<?xf16>, %y: tensor<?xf16>, %o: tensor<?xf16>, %n: index) -> tensor<?xf16> {
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%x, %y : tensor<?xf16>, tensor<?xf16>) outs(%o : tensor<?xf16>) {
  ^bb0(%a: f16, %b: f16, %out: f16):
    %two = arith.constant 2.0 : f16
    %p = arith.mulf %a, %two : f16
    %s = arith.addf %p, %b : f16
    linalg.yield %s : f16
  } -> tensor<?xf16>
  return %r : tensor<?xf16>
}
func.func private @gt_f64(%x: tensor<?x?xf64>, %y: tensor<?x?xf64>, %o: tensor<?x?xi1>, %n: index, %m: index) -> tensor<?x?xi1> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<?x?xf64>, tensor<?x?xf64>) outs(%o : tensor<?x?xi1>) {
  ^bb0(%a: f64, %b: f64, %out: i1):
    %c = arith.cmpf ogt, %a, %b : f64
    linalg.yield %c : i1
  } -> tensor<?x?xi1>
  return %r : tensor<?x?xi1>
}
func.func private @select_i32(%c: tensor<?xi1>, %a: tensor<?xi32>, %b: tensor<?xi32>, %o: tensor<?xi32>, %n: index) -> tensor<?xi32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%c, %a, %b : tensor<?xi1>, tensor<?xi32>, tensor<?xi32>) outs(%o : tensor<?xi32>) {
  ^bb0(%p: i1, %u: i32, %v: i32, %out: i32):
    %s = arith.select %p, %u, %v : i32
    linalg.yield %s : i32
  } -> tensor<?xi32>
  return %r : tensor<?xi32>
}
func.func private @add_i8(%x: tensor<?xi8>, %y: tensor<?xi8>, %o: tensor<?xi8>, %n: index) -> tensor<?xi8> {
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%x, %y : tensor<?xi8>, tensor<?xi8>) outs(%o : tensor<?xi8>) {
  ^bb0(%a: i8, %b: i8, %out: i8):
    %s = arith.addi %a, %b : i8
    linalg.yield %s : i8
  } -> tensor<?xi8>
  return %r : tensor<?xi8>
}
func.func private @sum_i64(%x: tensor<?x?xi64>, %o: tensor<i64>, %n: index, %m: index) -> tensor<i64> {
  %zero = arith.constant 0 : i64
  %f = linalg.fill ins(%zero : i64) outs(%o : tensor<i64>) -> tensor<i64>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>],
                       iterator_types = ["reduction", "reduction"]}
      ins(%x : tensor<?x?xi64>) outs(%f : tensor<i64>) {
  ^bb0(%a: i64, %acc: i64):
    %s = arith.addi %a, %acc : i64
    linalg.yield %s : i64
  } -> tensor<i64>
  return %r : tensor<i64>
}
func.func @axpy(%in0: memref<?xf16>, %in1: memref<?xf16>, %out0: memref<?xf16>, %err: memref<1xi32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %x = bufferization.to_tensor %in0 restrict : memref<?xf16> to tensor<?xf16>
  %y = bufferization.to_tensor %in1 restrict : memref<?xf16> to tensor<?xf16>
  %n = tensor.dim %x, %c0 : tensor<?xf16>
  %e = tensor.empty(%n) : tensor<?xf16>
  %r = func.call @axpy_f16(%x, %y, %e, %n) : (tensor<?xf16>, tensor<?xf16>, tensor<?xf16>, index) -> tensor<?xf16>
  bufferization.materialize_in_destination %r in restrict writable %out0 : (tensor<?xf16>, memref<?xf16>) -> ()
  return
}
func.func @gt(%in0: memref<?x?xf64>, %in1: memref<?x?xf64>, %out0: memref<?x?xi1>, %err: memref<1xi32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = bufferization.to_tensor %in0 restrict : memref<?x?xf64> to tensor<?x?xf64>
  %y = bufferization.to_tensor %in1 restrict : memref<?x?xf64> to tensor<?x?xf64>
  %n = tensor.dim %x, %c0 : tensor<?x?xf64>
  %m = tensor.dim %x, %c1 : tensor<?x?xf64>
  %e = tensor.empty(%n, %m) : tensor<?x?xi1>
  %r = func.call @gt_f64(%x, %y, %e, %n, %m) : (tensor<?x?xf64>, tensor<?x?xf64>, tensor<?x?xi1>, index, index) -> tensor<?x?xi1>
  bufferization.materialize_in_destination %r in restrict writable %out0 : (tensor<?x?xi1>, memref<?x?xi1>) -> ()
  return
}
func.func @select(%in0: memref<?xi1>, %in1: memref<?xi32>, %in2: memref<?xi32>, %out0: memref<?xi32>, %err: memref<1xi32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c = bufferization.to_tensor %in0 restrict : memref<?xi1> to tensor<?xi1>
  %a = bufferization.to_tensor %in1 restrict : memref<?xi32> to tensor<?xi32>
  %b = bufferization.to_tensor %in2 restrict : memref<?xi32> to tensor<?xi32>
  %n = tensor.dim %a, %c0 : tensor<?xi32>
  %e = tensor.empty(%n) : tensor<?xi32>
  %r = func.call @select_i32(%c, %a, %b, %e, %n) : (tensor<?xi1>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, index) -> tensor<?xi32>
  bufferization.materialize_in_destination %r in restrict writable %out0 : (tensor<?xi32>, memref<?xi32>) -> ()
  return
}
func.func @add8(%in0: memref<?xi8>, %in1: memref<?xi8>, %out0: memref<?xi8>, %err: memref<1xi32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %x = bufferization.to_tensor %in0 restrict : memref<?xi8> to tensor<?xi8>
  %y = bufferization.to_tensor %in1 restrict : memref<?xi8> to tensor<?xi8>
  %n = tensor.dim %x, %c0 : tensor<?xi8>
  %e = tensor.empty(%n) : tensor<?xi8>
  %r = func.call @add_i8(%x, %y, %e, %n) : (tensor<?xi8>, tensor<?xi8>, tensor<?xi8>, index) -> tensor<?xi8>
  bufferization.materialize_in_destination %r in restrict writable %out0 : (tensor<?xi8>, memref<?xi8>) -> ()
  return
}
func.func @sum(%in0: memref<?x?xi64>, %out0: memref<i64>, %err: memref<1xi32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = bufferization.to_tensor %in0 restrict : memref<?x?xi64> to tensor<?x?xi64>
  %n = tensor.dim %x, %c0 : tensor<?x?xi64>
  %m = tensor.dim %x, %c1 : tensor<?x?xi64>
  %e = tensor.empty() : tensor<i64>
  %r = func.call @sum_i64(%x, %e, %n, %m) : (tensor<?x?xi64>, tensor<i64>, index, index) -> tensor<i64>
  bufferization.materialize_in_destination %r in restrict writable %out0 : (tensor<i64>, memref<i64>) -> ()
  return
}
"""

# Embedding lookup: a generic whose body gathers with tensor.extract.
GATHER = """
func.func private @take(%table: tensor<?x16xf32>, %idx: tensor<?xi64>, %o: tensor<?x16xf32>, %n: index) -> tensor<?x16xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%idx : tensor<?xi64>) outs(%o : tensor<?x16xf32>) {
  ^bb0(%k: i64, %out: f32):
    %row = arith.index_cast %k : i64 to index
    %col = linalg.index 1 : index
    %v = tensor.extract %table[%row, %col] : tensor<?x16xf32>
    linalg.yield %v : f32
  } -> tensor<?x16xf32>
  return %r : tensor<?x16xf32>
}
func.func @main(%in0: memref<?x16xf32>, %in1: memref<?xi64>, %out0: memref<?x16xf32>, %err: memref<1xi32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %t = bufferization.to_tensor %in0 restrict : memref<?x16xf32> to tensor<?x16xf32>
  %i = bufferization.to_tensor %in1 restrict : memref<?xi64> to tensor<?xi64>
  %n = tensor.dim %i, %c0 : tensor<?xi64>
  %e = tensor.empty(%n) : tensor<?x16xf32>
  %r = func.call @take(%t, %i, %e, %n) : (tensor<?x16xf32>, tensor<?xi64>, tensor<?x16xf32>, index) -> tensor<?x16xf32>
  bufferization.materialize_in_destination %r in restrict writable %out0 : (tensor<?x16xf32>, memref<?x16xf32>) -> ()
  return
}
"""

# Tensor-level data movement inside a kernel: concat rows, pad columns, scale.
TENSOR_OPS = """
func.func private @concat_pad(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>, %o: tensor<?x10xf32>, %n: index) -> tensor<?x10xf32> {
  %zero = arith.constant 0.0 : f32
  %c = tensor.concat dim(0) %x, %y : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  %p = tensor.pad %c low[0, 1] high[0, 1] {
  ^bb0(%i: index, %j: index):
    tensor.yield %zero : f32
  } : tensor<?x8xf32> to tensor<?x10xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%p : tensor<?x10xf32>) outs(%o : tensor<?x10xf32>) {
  ^bb0(%a: f32, %out: f32):
    %two = arith.constant 2.0 : f32
    %s = arith.mulf %a, %two : f32
    linalg.yield %s : f32
  } -> tensor<?x10xf32>
  return %r : tensor<?x10xf32>
}
func.func @main(%in0: memref<?x8xf32>, %in1: memref<?x8xf32>, %out0: memref<?x10xf32>, %err: memref<1xi32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %x = bufferization.to_tensor %in0 restrict : memref<?x8xf32> to tensor<?x8xf32>
  %y = bufferization.to_tensor %in1 restrict : memref<?x8xf32> to tensor<?x8xf32>
  %n0 = tensor.dim %x, %c0 : tensor<?x8xf32>
  %n1 = tensor.dim %y, %c0 : tensor<?x8xf32>
  %n = arith.addi %n0, %n1 : index
  %e = tensor.empty(%n) : tensor<?x10xf32>
  %r = func.call @concat_pad(%x, %y, %e, %n) : (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x10xf32>, index) -> tensor<?x10xf32>
  bufferization.materialize_in_destination %r in restrict writable %out0 : (tensor<?x10xf32>, memref<?x10xf32>) -> ()
  return
}
"""

SIZES = (1, 13, 97, 1024)
RNG = np.random.default_rng(1234)


def compile_module(text: str, **options) -> cpu.JitModule:
    options.setdefault("num_threads", 2)
    with ir.Context():
        module = ir.Module.parse(text)
        cpu.lower(module, cpu.CPUOptions(**options))
        return cpu.JitModule(module)


def stage_ir(text: str, until: str, **options) -> str:
    options.setdefault("num_threads", 2)
    with ir.Context():
        module = ir.Module.parse(text)
        cpu.lower(module, cpu.CPUOptions(**options), until=until)
        return str(module)


def err_slot() -> np.ndarray:
    return np.zeros(1, np.int32)


# ONE compile per fixture, shared by the tests of this file.
@pytest.fixture(scope="module")
def jits() -> dict[str, cpu.JitModule]:
    names = ("ADD_RELU", "ROW_SUM", "SOFTMAX_LIKE", "MATMUL_BIAS", "MATMUL", "CHAIN3", "DTYPES",
             "GATHER", "TENSOR_OPS")
    return {n: compile_module(globals()[n], num_threads=2) for n in names}


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# --------------------------------------------------------------------------------------------
# Numerics against numpy at n in {1, prime, large}
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
def test_add_relu_broadcast(jits, n):
    x, b = rand(n, 64), rand(64)
    out, err = np.full_like(x, np.nan), err_slot()
    jits["ADD_RELU"].invoke("main", x, b, out, err)
    assert err[0] == 0
    np.testing.assert_array_equal(out, np.maximum(x + b, 0))


@pytest.mark.parametrize("n", SIZES)
def test_row_sum_dynamic_reduction(jits, n):
    x = rand(n, n + 3)  # reduction extent not a multiple of the vector tile
    out, err = np.full(n, np.nan, np.float32), err_slot()
    jits["ROW_SUM"].invoke("main", x, out, err)
    assert err[0] == 0
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("n", SIZES)
def test_softmax_like_two_kernels(jits, n):
    x = rand(n, 32)
    out, err = np.full_like(x, np.nan), err_slot()
    jits["SOFTMAX_LIKE"].invoke("main", x, out, err)
    assert err[0] == 0
    np.testing.assert_allclose(out, np.exp(x - x.max(axis=1, keepdims=True)), rtol=1e-5)


@pytest.mark.parametrize("n", SIZES)
def test_matmul_bias(jits, n):
    k = n // 2 + 1
    a, b, bias = rand(n, k), rand(k, 40), rand(40)
    out, err = np.full((n, 40), np.nan, np.float32), err_slot()
    jits["MATMUL_BIAS"].invoke("main", a, b, bias, out, err)
    assert err[0] == 0
    np.testing.assert_allclose(out, a @ b + bias, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("n", SIZES)
def test_matmul(jits, n):
    a, b = rand(n, 64), rand(64, 48)
    out, err = np.full((n, 48), np.nan, np.float32), err_slot()
    jits["MATMUL"].invoke("main", a, b, out, err)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("n", SIZES)
def test_chain_of_three_kernels(jits, n):
    x, y = rand(n, n + 5), rand(n, n + 5)
    out, err = np.full_like(x, np.nan), err_slot()
    jits["CHAIN3"].invoke("main", x, y, out, err)
    assert err[0] == 0
    t = x * y
    np.testing.assert_allclose(out, t - t.sum(axis=0), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("n", SIZES)
def test_element_types_i1_and_rank0(jits, n):
    jit, err = jits["DTYPES"], err_slot()
    x, y = rand(n, dtype=np.float16), rand(n, dtype=np.float16)
    out = np.zeros_like(x)
    jit.invoke("axpy", x, y, out, err)
    np.testing.assert_allclose(out, x * np.float16(2) + y, rtol=2e-3, atol=2e-3)

    a, b = rand(n, 7, dtype=np.float64), rand(n, 7, dtype=np.float64)
    mask = np.zeros((n, 7), np.bool_)
    jit.invoke("gt", a, b, mask, err)
    np.testing.assert_array_equal(mask, a > b)

    c = RNG.random(n) > 0.5
    u, v = (RNG.integers(-1000, 1000, n, dtype=np.int32) for _ in range(2))
    sel = np.zeros(n, np.int32)
    jit.invoke("select", c, u, v, sel, err)
    np.testing.assert_array_equal(sel, np.where(c, u, v))

    p, q = (RNG.integers(-128, 128, n, dtype=np.int8) for _ in range(2))
    s8 = np.zeros(n, np.int8)
    jit.invoke("add8", p, q, s8, err)
    np.testing.assert_array_equal(s8, p + q)  # wraps around like numpy

    m = RNG.integers(-10**6, 10**6, (n, 5), dtype=np.int64)
    total = np.zeros((), np.int64)
    jit.invoke("sum", m, total, err)
    assert total == m.sum()
    assert err[0] == 0


@pytest.mark.parametrize("n", SIZES)
def test_gather_with_tensor_extract(jits, n):
    table, idx = rand(50, 16), RNG.integers(0, 50, n)
    out, err = np.full((n, 16), np.nan, np.float32), err_slot()
    jits["GATHER"].invoke("main", table, idx, out, err)
    np.testing.assert_array_equal(out, table[idx])


@pytest.mark.parametrize("n", SIZES)
def test_concat_pad_in_kernel(jits, n):
    x, y = rand(n, 8), rand(n + 2, 8)
    out, err = np.full((2 * n + 2, 10), np.nan, np.float32), err_slot()
    jits["TENSOR_OPS"].invoke("main", x, y, out, err)
    np.testing.assert_array_equal(out, 2 * np.pad(np.concatenate([x, y]), ((0, 0), (1, 1))))


def test_check_block_reports_error_code(jits):
    x, b = rand(8, 64), rand(64)
    out, err = np.full((9, 64), 7.0, np.float32), err_slot()  # wrong number of rows
    jits["ADD_RELU"].invoke("main", x, b, out, err)
    assert err[0] == 1
    assert (out == 7.0).all()
    a, bm, bias = rand(4, 3), rand(5, 40), rand(40)  # K mismatch
    out, err = np.zeros((4, 40), np.float32), err_slot()
    jits["MATMUL_BIAS"].invoke("main", a, bm, bias, out, err)
    assert err[0] == 2


# --------------------------------------------------------------------------------------------
# Stages and schedules
# --------------------------------------------------------------------------------------------


def test_stage_names_and_order():
    assert list(cpu.STAGES) == ["vectorize", "calls", "bufferize", "parallelize", "to-llvm"]
    assert set(cpu.pipeline_strings()) == set(cpu.STAGES)
    with pytest.raises(ValueError, match="unknown CPU stage"):
        with ir.Context():
            cpu.lower(ir.Module.parse(ADD_RELU), until="nope")


def test_elementwise_is_vectorized():
    text = stage_ir(ADD_RELU, "vectorize")
    assert 'relax_cpu.schedules = ["vector"]' in text
    assert "vector.transfer_read" in text and "vector<64xf32>" in text
    assert "scf.forall" in text  # outer rows are split over threads
    assert "linalg.generic" not in text


def test_reduction_is_vectorized_with_register_accumulator():
    text = stage_ir(ROW_SUM, "vectorize")
    assert '"vector-split-reduction"' in text
    # a vector of partial sums is carried by the reduction loop
    assert "iter_args(%arg9 = %cst) -> (vector<16xf32>)" in text or "-> (vector<16xf32>)" in text
    assert "vector.transfer_read" in text


def test_column_reduction_and_matmul_are_vectorized():
    text = stage_ir(CHAIN3, "vectorize")
    assert text.count('relax_cpu.schedules = ["vector"') == 3
    text = stage_ir(MATMUL_BIAS, "vectorize")
    if '"matmul-register-blocked"' not in text:  # backend/cpu_matmul.py declined or failed
        assert '"vector-matmul"' in text and "vector<4x16xf32>" in text
        assert "linalg.matmul" not in text  # partial tiles are vectorized too


def test_matmul_kernel_takes_the_kernel_level_hook():
    pytest.importorskip("relax_mlir.backend.cpu_matmul")
    text = stage_ir(MATMUL, "vectorize")
    assert 'relax_cpu.schedules = ["matmul-register-blocked"]' in text


def test_i1_falls_back_to_scalar_loops():
    text = stage_ir(DTYPES, "vectorize")
    assert '@gt_f64(' in text and 'relax_cpu.schedules = ["tiled"]' in text


def test_vectorize_false_only_tiles():
    text = stage_ir(ADD_RELU, "vectorize", vectorize=False)
    assert "vector." not in text
    assert 'relax_cpu.schedules = ["tiled"]' in text


def test_bufferize_writes_outputs_in_place_and_frees_temporaries():
    text = stage_ir(CHAIN3, "bufferize")
    # kernels stay functions; each call writes its planned buffer (no result is returned)
    calls = [line for line in text.splitlines() if "call @" in line]
    assert calls and not any("=" in line.split("call @")[0] for line in calls)
    assert "memref.copy" not in text and "linalg.copy" not in text  # no copy of the output
    assert text.count("memref.alloc(") == 2  # the two temporaries ...
    assert text.count("memref.dealloc") == 2  # ... are freed


def test_parallelize_uses_async_runtime_or_stays_sequential():
    two = stage_ir(ADD_RELU, "parallelize", num_threads=2)
    assert "async.runtime" in two and "scf.forall" not in two
    one = stage_ir(ADD_RELU, "parallelize", num_threads=1)
    assert "async" not in one and "scf.forall" not in one and "scf.parallel" not in one


def test_single_thread_numerics():
    jit = compile_module(CHAIN3, num_threads=1)
    x, y = rand(97, 31), rand(97, 31)
    out, err = np.zeros_like(x), err_slot()
    jit.invoke("main", x, y, out, err)
    t = x * y
    np.testing.assert_allclose(out, t - t.sum(axis=0), rtol=1e-4, atol=1e-3)


def test_lowering_failure_names_stage_pass_and_diagnostic():
    bad = """
    func.func @main(%in0: memref<?xf32>, %out0: memref<?xf32>, %err: memref<1xi32>) attributes {llvm.emit_c_interface} {
      %t = bufferization.to_tensor %in0 restrict : memref<?xf32> to tensor<?xf32>
      %r = tosa.abs %t : (tensor<?xf32>) -> tensor<?xf32>
      bufferization.materialize_in_destination %r in restrict writable %out0 : (tensor<?xf32>, memref<?xf32>) -> ()
      return
    }
    """
    with ir.Context():
        module = ir.Module.parse(bad)
        with pytest.raises(cpu.LoweringError) as info:
            cpu.lower(module)
    assert info.value.stage == "bufferize"
    assert info.value.pipeline.startswith("one-shot-bufferize")
    assert "op was not bufferized" in info.value.diagnostics and "tosa.abs" in str(info.value)


def test_unresolved_symbol_raises_before_the_engine_is_created():
    text = """
    func.func private @not_a_symbol_anywhere(%x: memref<?xf32>)
    func.func @main(%in0: memref<?xf32>, %err: memref<1xi32>) attributes {llvm.emit_c_interface} {
      func.call @not_a_symbol_anywhere(%in0) : (memref<?xf32>) -> ()
      return
    }
    """
    with ir.Context():
        module = ir.Module.parse(text)
        cpu.lower(module)
        with pytest.raises(cpu.LoweringError, match="not_a_symbol_anywhere"):
            cpu.JitModule(module)


def test_split_pipeline_respects_nesting():
    assert cpu.split_pipeline("a,func.func(b,c{x=1 y=2}),d{p=q,r}") == [
        "a", "func.func(b,c{x=1 y=2})", "d{p=q,r}"]


# --------------------------------------------------------------------------------------------
# Passes for the driver
# --------------------------------------------------------------------------------------------


def test_passes_are_registered_and_run_in_a_pass_manager():
    from mlir.passmanager import PassManager

    names = [p.name for p in cpu.CPU_PASSES]
    assert names == ["relax-cpu-vectorize", "relax-cpu-calls", "relax-cpu-bufferize",
                     "relax-cpu-row-masks", "relax-cpu-parallelize", "relax-cpu-to-llvm", "relax-cpu-lower"]
    with ir.Context():
        module = ir.Module.parse(ADD_RELU)
        pm = PassManager()
        for cls in cpu.CPU_PASSES[:-1]:
            p = cls(num_threads=2) if "num_threads" in cls.__dataclass_fields__ else cls()
            pm.add(lambda op, _pass, p=p: p.run(op), name=type(p).__name__, argument=p.name)
        pm.run(module.operation)
        assert "llvm.func internal @main" in str(module)  # inlined into its C-interface wrapper
        assert "llvm.func @_mlir_ciface_main" in str(module)
        jit = cpu.JitModule(module)
    x, b = rand(5, 64), rand(64)
    out, err = np.zeros_like(x), err_slot()
    jit.invoke("main", x, b, out, err)
    np.testing.assert_array_equal(out, np.maximum(x + b, 0))


# --------------------------------------------------------------------------------------------
# JIT
# --------------------------------------------------------------------------------------------


def test_concurrent_invoke_from_python_threads(jits):
    jit = jits["CHAIN3"]
    failures = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        for it in range(40):
            n = int(rng.integers(1, 300))
            x = rng.standard_normal((n, 33)).astype(np.float32)
            y = rng.standard_normal((n, 33)).astype(np.float32)
            out, err = np.zeros_like(x), err_slot()
            jit.invoke("main", x, y, out, err)
            t = x * y
            if err[0] != 0 or not np.allclose(out, t - t.sum(axis=0), rtol=1e-4, atol=1e-3):
                failures.append((seed, it, n))

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_invoke_checks_arguments(jits):
    jit = jits["ADD_RELU"]
    x, b, out = rand(4, 64), rand(64), np.zeros((4, 64), np.float32)
    with pytest.raises(TypeError, match="dtype float64"):
        jit.invoke("main", x.astype(np.float64), b, out, err_slot())
    with pytest.raises(ValueError, match="expected"):
        jit.invoke("main", rand(4, 63), b, out, err_slot())
    with pytest.raises(ValueError, match="C-contiguous"):
        jit.invoke("main", np.asfortranarray(rand(4, 64)), b, out, err_slot())
    with pytest.raises(TypeError, match="takes 4"):
        jit.invoke("main", x, b, out)
    with pytest.raises(KeyError):
        jit.invoke("nope", x)
    ro = x.copy()
    ro.flags.writeable = False  # read-only inputs are fine
    jit.invoke("main", ro, b, out, err_slot())
    np.testing.assert_array_equal(out, np.maximum(x + b, 0))


def test_no_leak_per_call(jits):
    jit = jits["CHAIN3"]
    x, y = rand(512, 512), rand(512, 512)  # 1 MiB temporary per call
    out, err = np.zeros_like(x), err_slot()

    def rss_pages():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1])

    for _ in range(5):
        jit.invoke("main", x, y, out, err)
    before = rss_pages()
    for _ in range(200):
        jit.invoke("main", x, y, out, err)
    grown_mib = (rss_pages() - before) * 4096 / 2**20
    assert grown_mib < 20, f"RSS grew by {grown_mib:.1f} MiB over 200 calls"


def test_engines_with_async_runtime_outlive_each_other():
    # Regression: handing libmlir_async_runtime.so to the engine made the second engine crash
    # once the first was destroyed.
    import gc

    first = compile_module(ADD_RELU, num_threads=2)
    second = compile_module(ADD_RELU, num_threads=2)
    del first
    gc.collect()
    x, b = rand(4096, 64), rand(64)
    out, err = np.zeros_like(x), err_slot()
    second.invoke("main", x, b, out, err)
    np.testing.assert_array_equal(out, np.maximum(x + b, 0))


def test_num_threads_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("RELAX_MLIR_NUM_THREADS", "1")
    assert cpu.CPUOptions().num_threads == 1
    monkeypatch.setenv("RELAX_MLIR_NUM_THREADS", "zero")
    with pytest.raises(ValueError, match="RELAX_MLIR_NUM_THREADS"):
        cpu.CPUOptions()
    monkeypatch.delenv("RELAX_MLIR_NUM_THREADS")
    assert cpu.CPUOptions().num_threads >= 1
    assert hash(cpu.CPUOptions(num_threads=2)) == hash(cpu.CPUOptions(num_threads=2))


def test_kernel_writing_through_a_reshape_is_called_not_inlined():
    """A kernel that fills the collapsed view of its output and returns it expanded back writes
    its output in place (a call, not inlined); one returning a reshape of an argument that nothing
    wrote is a view (inlined)."""
    text = """
    func.func private @writes(%out: tensor<?x4x1xf32>) -> tensor<?x4x1xf32> {
      %c0 = arith.constant 0 : index
      %z = arith.constant 0.0 : f32
      %c = tensor.collapse_shape %out [[0], [1, 2]] : tensor<?x4x1xf32> into tensor<?x4xf32>
      %f = linalg.fill ins(%z : f32) outs(%c : tensor<?x4xf32>) -> tensor<?x4xf32>
      %n = tensor.dim %out, %c0 : tensor<?x4x1xf32>
      %e = tensor.expand_shape %f [[0], [1, 2]] output_shape [%n, 4, 1] : tensor<?x4xf32> into tensor<?x4x1xf32>
      return %e : tensor<?x4x1xf32>
    }
    func.func private @view(%in: tensor<?x4xf32>, %out: tensor<?x4x1xf32>) -> tensor<?x4x1xf32> {
      %c0 = arith.constant 0 : index
      %n = tensor.dim %in, %c0 : tensor<?x4xf32>
      %e = tensor.expand_shape %in [[0], [1, 2]] output_shape [%n, 4, 1] : tensor<?x4xf32> into tensor<?x4x1xf32>
      return %e : tensor<?x4x1xf32>
    }
    """
    with ir.Context():
        module = ir.Module.parse(text)
        writes, view = list(module.body.operations)
        assert cpu._writes_its_outputs(writes)
        assert not cpu._writes_its_outputs(view)


@pytest.mark.parametrize("dtype,options", [("bool", {}), ("float32", {"vectorize": False})])
def test_slice_kernel_that_folds_into_a_view_is_inlined(dtype, options):
    """A slice copied whole into its output is a kernel until canonicalization folds the copy
    away; it is then a view, and must be inlined: called, its strided result was cast to a
    contiguous buffer at the function boundary and the caller read the wrong elements (fuzz seed
    2342267: `(a1 != a0)[:, 0]`; any dtype whose copy is not vectorized)."""
    import jax
    import jax.numpy as jnp

    import relax_mlir

    def fn(a0, a1):
        v = a1 != a0 if dtype == "bool" else a1 * a0
        return v[:, 0]

    m, = jax.export.symbolic_shape("m")
    specs = [jax.ShapeDtypeStruct((), jnp.float32), jax.ShapeDtypeStruct((m, m, m), jnp.float32)]
    exe = relax_mlir.compile(relax_mlir.from_jax(fn, *specs), options=options)
    for size in (1, 3, 17, 40):
        a0 = np.float32(1.0)
        a1 = RNG.integers(-2, 3, (size, size, size)).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(exe(a0, a1)), np.asarray(fn(a0, a1)))


def test_a_strided_view_cast_to_a_contiguous_buffer_is_refused():
    """The guard behind the test above: a function returning a strided view through the
    identity-layout boundary is refused at bufferization, never run."""
    text = """
    func.func @main(%a: memref<?x?x?xf32>, %out: memref<?x1x?xf32>) attributes {llvm.emit_c_interface} {
      %t = bufferization.to_tensor %a restrict : memref<?x?x?xf32> to tensor<?x?x?xf32>
      %r = func.call @col(%t) {no_inline} : (tensor<?x?x?xf32>) -> tensor<?x1x?xf32>
      bufferization.materialize_in_destination %r in restrict writable %out : (tensor<?x1x?xf32>, memref<?x1x?xf32>) -> ()
      return
    }
    func.func private @col(%t: tensor<?x?x?xf32>) -> tensor<?x1x?xf32> {
      %c0 = arith.constant 0 : index
      %c2 = arith.constant 2 : index
      %n = tensor.dim %t, %c0 : tensor<?x?x?xf32>
      %k = tensor.dim %t, %c2 : tensor<?x?x?xf32>
      %s = tensor.extract_slice %t[0, 0, 0] [%n, 1, %k] [1, 1, 1] : tensor<?x?x?xf32> to tensor<?x1x?xf32>
      return %s : tensor<?x1x?xf32>
    }
    """
    with ir.Context():
        module = ir.Module.parse(text)
        with pytest.raises(cpu.LoweringError, match="strided view is cast to a contiguous buffer"):
            cpu.stage_bufferize(module, cpu.CPUOptions(num_threads=1))


def test_inexact_layout_casts_become_copies_or_are_refused():
    """A view cast to a contiguous parameter: kept when its layout is exactly contiguous, copied
    into a contiguous buffer when the callee only reads it (a [:n, :n] slice of a 128 x 128
    mask), refused when the callee writes through it."""
    text = """
    func.func private @reads(%m: memref<?x?xi8>, %out: memref<?x?xi8>) {
      memref.copy %m, %out : memref<?x?xi8> to memref<?x?xi8>
      return
    }
    func.func private @writes(%m: memref<?x?xi8>) {
      %c0 = arith.constant 0 : index
      %z = arith.constant 0 : i8
      memref.store %z, %m[%c0, %c0] : memref<?x?xi8>
      return
    }
    func.func private @row(%m: memref<1x128xi8>) {
      return
    }
    func.func @main(%a: memref<128x128xi8>, %out: memref<?x?xi8>, %n: index) {
      %v = memref.subview %a[0, 0] [%n, %n] [1, 1] : memref<128x128xi8> to memref<?x?xi8, strided<[128, 1]>>
      %c = memref.cast %v : memref<?x?xi8, strided<[128, 1]>> to memref<?x?xi8>
      func.call @reads(%c, %out) : (memref<?x?xi8>, memref<?x?xi8>) -> ()
      %r = memref.subview %a[0, 0] [1, 128] [1, 1] : memref<128x128xi8> to memref<1x128xi8, strided<[128, 1]>>
      %rc = memref.cast %r : memref<1x128xi8, strided<[128, 1]>> to memref<1x128xi8>
      func.call @row(%rc) : (memref<1x128xi8>) -> ()
      %w = memref.cast %v : memref<?x?xi8, strided<[128, 1]>> to memref<?x?xi8>
      func.call @writes(%w) : (memref<?x?xi8>) -> ()
      return
    }
    """
    with ir.Context():
        module = ir.Module.parse(text)
        with pytest.raises(cpu.LoweringError, match="cannot be copied"):
            cpu._copy_inexact_layout_casts(module.operation)
        module = ir.Module.parse(text.replace("func.call @writes(%w)", "func.call @reads(%w, %out)")
                                 .replace("(memref<?x?xi8>) -> ()\n      return", "(memref<?x?xi8>, memref<?x?xi8>) -> ()\n      return"))
        cpu._copy_inexact_layout_casts(module.operation)
        out = str(module)
        assert out.count("memref.copy %subview, %alloc") == 2, out
        assert "strided<[128, 1]>> to memref<1x128xi8>" in out and out.count("memref.cast") == 1, out
        assert module.operation.verify()


def test_host_loop_nests_of_inlined_updates_share_one_kernel():
    """In-place cache updates (`lax.dynamic_update_slice` of donated caches) are inlined into the
    entry; the loop nests they leave there are outlined into one shared kernel, called once per
    update, not compiled once per call site (backend/cpu_outline.py); the results still match
    jax at several sizes and clamped positions from one compile."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax import lax

    import relax_mlir
    from relax_mlir.backend.cpu_outline import PREFIX
    from relax_mlir.frontend.jax import from_jax

    layers = 4

    def f(upd, pos, *caches):
        return [lax.dynamic_update_slice(c, upd * (i + 1.0), (0, pos, 0, 0)) for i, c in enumerate(caches)]
    b, t = jax.export.symbolic_shape("b, t")
    specs = [jax.ShapeDtypeStruct((b, 2, 4, 64), jnp.float32), jax.ShapeDtypeStruct((), jnp.int32)] + \
        [jax.ShapeDtypeStruct((b, t + 2, 4, 64), jnp.float32)] * layers
    donate = tuple(range(2, 2 + layers))
    upstream = str(relax_mlir.run_passes(from_jax(f, *specs, donate_argnums=donate), relax_mlir.OPTIMIZE_PIPELINE))
    text = stage_ir(upstream, "parallelize")
    defs = [ln for ln in text.splitlines() if f"func.func private @{PREFIX}" in ln]
    calls = [ln for ln in text.splitlines() if f"call @{PREFIX}" in ln]
    assert len(defs) >= 1 and len(calls) >= layers and len(defs) < len(calls), (defs, calls)
    exe = relax_mlir.compile(from_jax(f, *specs, donate_argnums=donate))
    rng = np.random.default_rng(0)
    for bb, tt, p in ((1, 3, 0), (2, 7, 4), (3, 16, 20), (1, 13, -3)):
        upd = rng.standard_normal((bb, 2, 4, 64)).astype(np.float32)
        caches = [rng.standard_normal((bb, tt, 4, 64)).astype(np.float32) for _ in range(layers)]
        want = jax.jit(f)(upd, np.int32(p), *caches)
        got = exe(upd, np.int32(p), *[c.copy() for c in caches])
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_outlined_host_loops_are_shared_only_when_structurally_equal():
    """Nests equal up to the values they use share one function (called with each nest's own
    values); a different static offset or a different constant bound makes another function;
    constants are rematerialized inside (static bounds stay static)."""
    from relax_mlir.backend.cpu_outline import PREFIX, outline_host_loops

    text = """
    func.func @main(%a: memref<8x8xf32>, %b: memref<8x8xf32>, %x: f32) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %c3 = arith.constant 3 : index
      %sa = memref.subview %a[2, 0] [4, 8] [1, 1] : memref<8x8xf32> to memref<4x8xf32, strided<[8, 1], offset: 16>>
      scf.for %i = %c0 to %c4 step %c1 {
        memref.store %x, %sa[%i, %c0] : memref<4x8xf32, strided<[8, 1], offset: 16>>
      }
      %sb = memref.subview %b[2, 0] [4, 8] [1, 1] : memref<8x8xf32> to memref<4x8xf32, strided<[8, 1], offset: 16>>
      scf.for %i = %c0 to %c4 step %c1 {
        memref.store %x, %sb[%i, %c0] : memref<4x8xf32, strided<[8, 1], offset: 16>>
      }
      scf.for %i = %c0 to %c3 step %c1 {
        memref.store %x, %sb[%i, %c0] : memref<4x8xf32, strided<[8, 1], offset: 16>>
      }
      scf.for %i = %c0 to %c4 step %c1 {
        memref.store %x, %sb[%i, %c1] : memref<4x8xf32, strided<[8, 1], offset: 16>>
      }
      return
    }
    """
    with ir.Context():
        module = ir.Module.parse(text)
        n = outline_host_loops(module.operation, lambda f: ir.StringAttr(f.attributes["sym_name"]).value == "main")
        module.operation.verify()
        out = str(module)
    assert n == 4
    assert out.count(f"func.func private @{PREFIX}_") == 3  # the 2nd nest reuses the 1st's
    assert out.count(f"call @{PREFIX}_0(") == 2
    assert "scf.for" not in out.split("func.func @main")[1].split("return")[0]
    assert "arith.constant 3 : index" in out.split(f"@{PREFIX}_1(")[1]  # the bound stays a constant


def test_row_masks_of_partial_tiles_become_bounds_checks(monkeypatch):
    """A matmul over a dynamic row count keeps its partial register tiles masked by the rows left
    (`vector.create_mask %rows, %c32`) until to-llvm, which turns those masks into bounds checks
    (backend/cpu_masks.py): no masked store is left for LLVM (without the rewrite there are); every
    variant of the versioned kernel (1, <= 4, <= 16 rows and more) still equals numpy, from one
    compile."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import relax_mlir
    from relax_mlir.frontend.jax import from_jax

    (m,) = jax.export.symbolic_shape("m")
    specs = (jax.ShapeDtypeStruct((m, 256), jnp.float32), jax.ShapeDtypeStruct((256, 256), jnp.float32))

    def f(x, w):
        return jnp.maximum(x @ w, 0.0)
    upstream = str(relax_mlir.run_passes(from_jax(f, *specs), relax_mlir.OPTIMIZE_PIPELINE))
    assert "llvm.intr.masked.store" not in stage_ir(upstream, "to-llvm")
    with monkeypatch.context() as mp:
        mp.setattr(cpu, "row_masks_as_bounds", lambda op: 0)
        assert "llvm.intr.masked.store" in stage_ir(upstream, "to-llvm")
    exe = relax_mlir.compile(from_jax(f, *specs))
    rng = np.random.default_rng(0)
    w = rng.standard_normal((256, 256)).astype(np.float32)
    for rows in (1, 2, 3, 4, 5, 7, 13, 16, 17, 61, 200):
        x = rng.standard_normal((rows, 256)).astype(np.float32)
        np.testing.assert_allclose(exe(x, w), np.maximum(x @ w, 0.0), rtol=1e-4, atol=1e-4)


def test_subset_hoisting_runs_exactly_where_it_changes_a_kernel(monkeypatch):
    """`_may_hoist_subsets` skips loop-invariant-subset-hoisting on kernels where the pass's own
    preconditions fail (0.27 s on each fused attention kernel of the LLM prefill, for no change). On
    a small transformer block (matmuls, softmax, layer norm, reductions, causal attention) the pass
    runs on every kernel with the check answering: each kernel it changes must be one the check
    lets through, and the check must let through only kernels it changes."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import relax_mlir
    from relax_mlir.frontend.jax import from_jax

    hoist = "func.func(loop-invariant-subset-hoisting,canonicalize,cse)"
    rows = []
    may, run = cpu._may_hoist_subsets, cpu._Scratch.run

    def recording_run(self, pipeline, stage="vectorize"):
        if pipeline != hoist:
            return run(self, pipeline, stage)
        predicted, before = may(self.func), str(self.func)
        run(self, pipeline, stage)
        rows.append((str(self.func.attributes["sym_name"]), predicted, before != str(self.func)))
    monkeypatch.setattr(cpu, "_may_hoist_subsets", lambda f: True)
    monkeypatch.setattr(cpu._Scratch, "run", recording_run)
    (s,) = jax.export.symbolic_shape("s")
    rng = np.random.default_rng(1)
    w1, w2 = rng.standard_normal((32, 64)).astype(np.float32), rng.standard_normal((64, 32)).astype(np.float32)

    def block(x):
        h = (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)
        a = jax.nn.dot_product_attention(h[None, :, None], h[None, :, None], h[None, :, None], is_causal=True)[0, :, 0]
        x = x + a
        return x + jax.nn.gelu(x @ w1) @ w2, jnp.max(x, axis=0), jnp.sum(x * x, axis=-1)
    exe = relax_mlir.compile(from_jax(block, jax.ShapeDtypeStruct((s, 32), jnp.float32)))
    assert rows and any(changed for _, _, changed in rows)
    assert [r for r in rows if r[1] != r[2]] == []
    x = rng.standard_normal((9, 32)).astype(np.float32)
    for g, w in zip(exe(x), jax.jit(block)(x)):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-4, atol=1e-4)
