// RUN: relax-opt %s --split-input-file --relax-dispatch-library=mode=always --relax-dce | FileCheck %s
// RUN: relax-opt %s --split-input-file --relax-dispatch-library=mode=always --relax-dce --relax-legalize | FileCheck %s --check-prefix=KERNEL
// RUN: relax-opt %s --split-input-file --relax-dispatch-library=mode=auto | FileCheck %s --check-prefix=AUTO

// q @ k.T: the transpose folds into the call (k is read in place) and the result keeps its
// symbolic type; the permute_dims is dead.
// CHECK-LABEL: func.func @qk
// CHECK-SAME: (%[[Q:.*]]: !relax.tensor<["s", 64], f32>, %[[K:.*]]: !relax.tensor<["s", 64], f32>)
// CHECK-NOT: relax.permute_dims
// CHECK: %[[R:.*]] = "relax_v.call_library"(%[[Q]], %[[K]]) {callee = "sgemm", transpose_a = false, transpose_b = true} : (!relax.tensor<["s", 64], f32>, !relax.tensor<["s", 64], f32>) -> !relax.tensor<["s", "s"], f32>
// CHECK: return %[[R]]
// The kernel is the matmul itself (zero fill + generic), tagged for the CPU backend.
// KERNEL-LABEL: func.func @qk
// KERNEL: "relax_v.call_tir"(%{{.*}}, %{{.*}}) {callee = @[[F:sgemm_tb]]}
// KERNEL: func.func private @[[F]](%{{.*}}: tensor<?x64xf32>, %{{.*}}: tensor<?x64xf32>, %[[O:.*]]: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {{{.*}}relax.library = "sgemm"}
// KERNEL: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[O]] : tensor<?x?xf32>)
// KERNEL: linalg.generic {{.*}} outs(%[[Z]] : tensor<?x?xf32>) attrs = {relax.library = "sgemm", relax.transpose_a = false, relax.transpose_b = true}
// AUTO-LABEL: func.func @qk
// AUTO: "relax_v.call_library"
func.func @qk(%q: !relax.tensor<["s", 64], f32>, %k: !relax.tensor<["s", 64], f32>) -> !relax.tensor<["s", "s"], f32> {
  %kt = "relax.permute_dims"(%k) {axes = [1, 0]} : (!relax.tensor<["s", 64], f32>) -> !relax.tensor<[64, "s"], f32>
  %m = "relax.matmul"(%q, %kt) : (!relax.tensor<["s", 64], f32>, !relax.tensor<[64, "s"], f32>) -> !relax.tensor<["s", "s"], f32>
  return %m : !relax.tensor<["s", "s"], f32>
}

// -----

// Batched (equal batch dims): one call; the bias add stays a graph op for fusion.
// CHECK-LABEL: func.func @batched
// CHECK: "relax_v.call_library"(%{{.*}}, %{{.*}}) {callee = "sgemm", transpose_a = false, transpose_b = false} : (!relax.tensor<["b", "n", 32], f32>, !relax.tensor<["b", 32, 16], f32>) -> !relax.tensor<["b", "n", 16], f32>
// CHECK: "relax.add"
// AUTO-LABEL: func.func @batched
// AUTO: "relax_v.call_library"
func.func @batched(%a: !relax.tensor<["b", "n", 32], f32>, %b: !relax.tensor<["b", 32, 16], f32>, %c: !relax.tensor<[16], f32>) -> !relax.tensor<["b", "n", 16], f32> {
  %m = "relax.matmul"(%a, %b) : (!relax.tensor<["b", "n", 32], f32>, !relax.tensor<["b", 32, 16], f32>) -> !relax.tensor<["b", "n", 16], f32>
  %r = "relax.add"(%m, %c) : (!relax.tensor<["b", "n", 16], f32>, !relax.tensor<[16], f32>) -> !relax.tensor<["b", "n", 16], f32>
  return %r : !relax.tensor<["b", "n", 16], f32>
}

// -----

// Large static K and N: the cost model keeps the generated matmul.
// AUTO-LABEL: func.func @big_static
// AUTO-NOT: call_library
// AUTO: "relax.matmul"
func.func @big_static(%a: !relax.tensor<["n", 512], f32>, %b: !relax.tensor<[512, 512], f32>) -> !relax.tensor<["n", 512], f32> {
  %m = "relax.matmul"(%a, %b) : (!relax.tensor<["n", 512], f32>, !relax.tensor<[512, 512], f32>) -> !relax.tensor<["n", 512], f32>
  return %m : !relax.tensor<["n", 512], f32>
}

// -----

// Integer matmuls and broadcast batch dims are not sgemm's: left alone.
// CHECK-LABEL: func.func @not_sgemm
// CHECK-NOT: call_library
// CHECK: "relax.matmul"
// CHECK: "relax.matmul"
func.func @not_sgemm(%a: !relax.tensor<["n", 8], i32>, %b: !relax.tensor<[8, 4], i32>, %x: !relax.tensor<[1, "n", 8], f32>, %y: !relax.tensor<[3, 8, 4], f32>) -> (!relax.tensor<["n", 4], i32>, !relax.tensor<[3, "n", 4], f32>) {
  %m = "relax.matmul"(%a, %b) : (!relax.tensor<["n", 8], i32>, !relax.tensor<[8, 4], i32>) -> !relax.tensor<["n", 4], i32>
  %f = "relax.matmul"(%x, %y) : (!relax.tensor<[1, "n", 8], f32>, !relax.tensor<[3, 8, 4], f32>) -> !relax.tensor<[3, "n", 4], f32>
  return %m, %f : !relax.tensor<["n", 4], i32>, !relax.tensor<[3, "n", 4], f32>
}
