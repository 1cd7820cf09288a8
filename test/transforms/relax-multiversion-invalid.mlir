// RUN: not relax-opt %s --split-input-file --relax-legalize 2>&1 | FileCheck %s --implicit-check-not=Traceback

// A hand-written versions attribute is checked where it is legalized.
// CHECK: error: 'relax_v.call_library' op: versions must be a list of {impl = "sgemm" | "generated", max_rows = N} with increasing N, the last without max_rows; got [{impl = "sgemm", max_rows = 4 : i64}]
func.func @no_default(%x: !relax.tensor<["b", 256], f32>, %w: !relax.tensor<[256, 256], f32>) -> !relax.tensor<["b", 256], f32> {
  %m = "relax_v.call_library"(%x, %w) {callee = "sgemm", versions = [{impl = "sgemm", max_rows = 4}]} : (!relax.tensor<["b", 256], f32>, !relax.tensor<[256, 256], f32>) -> !relax.tensor<["b", 256], f32>
  return %m : !relax.tensor<["b", 256], f32>
}

// -----

// CHECK: error: 'relax_v.call_library' op: versions must be a list
func.func @unknown_impl(%x: !relax.tensor<["b", 256], f32>, %w: !relax.tensor<[256, 256], f32>) -> !relax.tensor<["b", 256], f32> {
  %m = "relax_v.call_library"(%x, %w) {callee = "sgemm", versions = [{impl = "gemv", max_rows = 1}, {impl = "sgemm"}]} : (!relax.tensor<["b", 256], f32>, !relax.tensor<[256, 256], f32>) -> !relax.tensor<["b", 256], f32>
  return %m : !relax.tensor<["b", 256], f32>
}

// -----

// CHECK: error: 'relax_v.call_library' op: versions must be a list
func.func @not_a_list(%x: !relax.tensor<["b", 256], f32>, %w: !relax.tensor<[256, 256], f32>) -> !relax.tensor<["b", 256], f32> {
  %m = "relax_v.call_library"(%x, %w) {callee = "sgemm", versions = 3} : (!relax.tensor<["b", 256], f32>, !relax.tensor<[256, 256], f32>) -> !relax.tensor<["b", 256], f32>
  return %m : !relax.tensor<["b", 256], f32>
}

// -----

// A callee that is not a string (malformed-IR fuzz, seed 77123: an internal error).
// CHECK: error: 'relax_v.call_library' op: 'callee' must be a string attribute naming the routine
func.func @symbol_callee(%x: !relax.tensor<["b", 256], f32>, %w: !relax.tensor<[256, 256], f32>) -> !relax.tensor<["b", 256], f32> {
  %m = "relax_v.call_library"(%x, %w) {callee = @nowhere} : (!relax.tensor<["b", 256], f32>, !relax.tensor<[256, 256], f32>) -> !relax.tensor<["b", 256], f32>
  return %m : !relax.tensor<["b", 256], f32>
}

// -----

// A transpose flag that is not a bool (malformed-IR fuzz, seed 5151: an internal error).
// CHECK: error: 'relax_v.call_library' op: 'transpose_b' must be a bool attribute, not unit
func.func @unit_flag(%y: !relax.tensor<[7, 256], f32>, %k: !relax.tensor<[256, 256], f32>) -> !relax.tensor<[7, 256], f32> {
  %t = "relax_v.call_library"(%y, %k) {callee = "sgemm", transpose_a = false, transpose_b = unit} : (!relax.tensor<[7, 256], f32>, !relax.tensor<[256, 256], f32>) -> !relax.tensor<[7, 256], f32>
  return %t : !relax.tensor<[7, 256], f32>
}
