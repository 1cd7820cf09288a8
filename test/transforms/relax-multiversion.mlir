// RUN: env RELAX_MLIR_BLAS_THREADS=1 relax-opt %s --split-input-file --relax-multiversion=mode=auto | FileCheck %s
// RUN: env RELAX_MLIR_BLAS_THREADS=1 relax-opt %s --split-input-file --relax-multiversion=mode=auto --relax-legalize | FileCheck %s --check-prefix=KERNEL
// RUN: env RELAX_MLIR_BLAS_THREADS=2 relax-opt %s --split-input-file --relax-multiversion=mode=auto | FileCheck %s --check-prefix=POOL
// RUN: env RELAX_MLIR_BLAS_THREADS=2 relax-opt %s --split-input-file --relax-multiversion=mode=auto --relax-legalize | FileCheck %s --check-prefix=POOLK
// RUN: relax-opt %s --split-input-file --relax-multiversion=mode=never | FileCheck %s --check-prefix=NEVER

// K = 2048: generated code up to 16 rows, BLAS above (the measured table in multiversion.py).
// CHECK-LABEL: func.func @deep
// CHECK-SAME: (%[[X:.*]]: !relax.tensor<["b", 2048], f32>, %[[W:.*]]: !relax.tensor<[2048, 512], f32>)
// CHECK-NOT: "relax.matmul"
// CHECK: %[[R:.*]] = "relax_v.call_library"(%[[X]], %[[W]]) {callee = "sgemm", rows = "b", transpose_a = false, transpose_b = false, versions = [{impl = "generated", max_rows = 16 : i64}, {impl = "sgemm"}]}
// CHECK: return %[[R]]
// One kernel; an scf.if chain on the row count picks the variant: b <= 1 gemv (the
// matrix-vector product), <= 4 small, <= 16 medium (generated), else the BLAS-tagged generic.
// KERNEL-LABEL: func.func @deep
// KERNEL: "relax_v.call_tir"(%{{.*}}, %{{.*}}) {callee = @[[F:sgemm_versions]]}
// KERNEL: func.func private @[[F]](%[[A:.*]]: tensor<?x2048xf32>, %[[B:.*]]: tensor<2048x512xf32>, %[[O:.*]]: tensor<?x512xf32>)
// KERNEL-DAG: %[[C1:.*]] = arith.constant 1 : index
// KERNEL-DAG: %[[C4:.*]] = arith.constant 4 : index
// KERNEL-DAG: %[[C16:.*]] = arith.constant 16 : index
// KERNEL: %[[M:.*]] = tensor.dim %[[A]], %{{.*}} : tensor<?x2048xf32>
// KERNEL: %[[P0:.*]] = arith.cmpi ule, %[[M]], %[[C1]] : index
// KERNEL: scf.if %[[P0]]
// KERNEL: linalg.matmul {relax_mlir.matmul_variant = "gemv"} ins(%[[A]], %[[B]]
// KERNEL: } else {
// KERNEL: %[[P1:.*]] = arith.cmpi ule, %[[M]], %[[C4]] : index
// KERNEL: scf.if %[[P1]]
// KERNEL: linalg.matmul {relax_mlir.matmul_variant = "small"} ins(%[[A]], %[[B]]
// KERNEL: } else {
// KERNEL: %[[P2:.*]] = arith.cmpi ule, %[[M]], %[[C16]] : index
// KERNEL: scf.if %[[P2]]
// KERNEL: linalg.matmul {relax_mlir.matmul_variant = "medium"}
// KERNEL: } else {
// KERNEL-NOT: "large"
// KERNEL: linalg.generic {{.*}} ins(%[[A]], %[[B]] : tensor<?x2048xf32>, tensor<2048x512xf32>) {{.*}}relax.library = "sgemm", relax.transpose_a = false, relax.transpose_b = false}
// With BLAS products on the run-time library's pool (RELAX_MLIR_BLAS_THREADS > 1), one row is
// OpenBLAS's sgemv split over the pool instead of the one-thread generated gemv.
// POOL-LABEL: func.func @deep
// POOL: "relax_v.call_library"(%{{.*}}, %{{.*}}) {callee = "sgemm", rows = "b", transpose_a = false, transpose_b = false, versions = [{impl = "sgemm", max_rows = 1 : i64}, {impl = "generated", max_rows = 16 : i64}, {impl = "sgemm"}]}
// POOLK-LABEL: func.func @deep
// POOLK: %[[M:.*]] = tensor.dim
// POOLK: scf.if
// POOLK-NOT: "gemv"
// POOLK: relax.library = "sgemm"
// POOLK: } else {
// POOLK: linalg.matmul {relax_mlir.matmul_variant = "small"}
// POOLK: linalg.matmul {relax_mlir.matmul_variant = "medium"}
// POOLK: relax.library = "sgemm"
// POOL-LABEL: func.func @narrow
// POOL: versions = [{impl = "sgemm", max_rows = 8 : i64}, {impl = "generated"}]
// NEVER-LABEL: func.func @deep
// NEVER-NOT: versions
// NEVER: "relax.matmul"
func.func @deep(%x: !relax.tensor<["b", 2048], f32>, %w: !relax.tensor<[2048, 512], f32>) -> !relax.tensor<["b", 512], f32> {
  %m = "relax.matmul"(%x, %w) : (!relax.tensor<["b", 2048], f32>, !relax.tensor<[2048, 512], f32>) -> !relax.tensor<["b", 512], f32>
  return %m : !relax.tensor<["b", 512], f32>
}

// -----

// Small weights (K * N <= 2^16): BLAS up to 8 rows (the matrix-vector end), generated above.
// CHECK-LABEL: func.func @narrow
// CHECK: "relax_v.call_library"(%{{.*}}, %{{.*}}) {callee = "sgemm", rows = "s", transpose_a = false, transpose_b = false, versions = [{impl = "sgemm", max_rows = 8 : i64}, {impl = "generated"}]}
// KERNEL-LABEL: func.func @narrow
// KERNEL: func.func private @sgemm_versions(%[[A:[a-z0-9]+]]: tensor<?x256xf32>
// KERNEL: %[[M:.*]] = tensor.dim %[[A]]
// KERNEL: %[[P1:.*]] = arith.cmpi ule, %[[M]], %{{.*}} : index
// KERNEL: scf.if %[[P1]]
// KERNEL: linalg.generic {{.*}} attrs = {{.*}}relax.library = "sgemm"
// KERNEL: } else {
// KERNEL: linalg.matmul {relax_mlir.matmul_variant = "medium"}
// KERNEL: linalg.matmul {relax_mlir.matmul_variant = "large"}
// KERNEL-NOT: "small"
func.func @narrow(%x: !relax.tensor<["s", 256], f32>, %w: !relax.tensor<[256, 256], f32>) -> !relax.tensor<["s", 256], f32> {
  %m = "relax.matmul"(%x, %w) : (!relax.tensor<["s", 256], f32>, !relax.tensor<[256, 256], f32>) -> !relax.tensor<["s", 256], f32>
  return %m : !relax.tensor<["s", 256], f32>
}

// -----

// One implementation wins at every row count (a 1024-wide weight, K = 512): left as it is; a
// static row count and a transposed library call have nothing to choose at run time.
// CHECK-LABEL: func.func @one_winner
// CHECK-NOT: versions
// CHECK: "relax.matmul"
// CHECK: "relax.matmul"
// CHECK: "relax_v.call_library"(%{{.*}}, %{{.*}}) {callee = "sgemm", transpose_a = false, transpose_b = true}
// CHECK-NOT: versions
func.func @one_winner(%x: !relax.tensor<["b", 512], f32>, %w: !relax.tensor<[512, 1024], f32>, %y: !relax.tensor<[7, 256], f32>, %v: !relax.tensor<[256, 256], f32>, %k: !relax.tensor<[256, 256], f32>) -> (!relax.tensor<["b", 1024], f32>, !relax.tensor<[7, 256], f32>, !relax.tensor<[7, 256], f32>) {
  %m = "relax.matmul"(%x, %w) : (!relax.tensor<["b", 512], f32>, !relax.tensor<[512, 1024], f32>) -> !relax.tensor<["b", 1024], f32>
  %n = "relax.matmul"(%y, %v) : (!relax.tensor<[7, 256], f32>, !relax.tensor<[256, 256], f32>) -> !relax.tensor<[7, 256], f32>
  %t = "relax_v.call_library"(%y, %k) {callee = "sgemm", transpose_a = false, transpose_b = true} : (!relax.tensor<[7, 256], f32>, !relax.tensor<[256, 256], f32>) -> !relax.tensor<[7, 256], f32>
  return %m, %n, %t : !relax.tensor<["b", 1024], f32>, !relax.tensor<[7, 256], f32>, !relax.tensor<[7, 256], f32>
}

// -----

// A 3-D product [b, s, K] x [K, N] (an LLM's projection before any reshape): versioned on the
// b*s flattened rows, as ONE 2-D call between two reshapes (views of row-major data): BLAS up to
// 2 rows, generated up to 16, BLAS above for the [1024, 256] key projection.
// CHECK-LABEL: func.func @three_d
// CHECK-SAME: (%[[X:.*]]: !relax.tensor<["b", "s", 1024], f32>, %[[W:.*]]: !relax.tensor<[1024, 256], f32>)
// CHECK: %[[F:.*]] = "relax.reshape"(%[[X]]) {shape = ["b*s", 1024]} : (!relax.tensor<["b", "s", 1024], f32>) -> !relax.tensor<["b*s", 1024], f32>
// CHECK: %[[C:.*]] = "relax_v.call_library"(%[[F]], %[[W]]) {callee = "sgemm", rows = "b*s", transpose_a = false, transpose_b = false, versions = [{impl = "sgemm", max_rows = 2 : i64}, {impl = "generated", max_rows = 16 : i64}, {impl = "sgemm"}]} : (!relax.tensor<["b*s", 1024], f32>, !relax.tensor<[1024, 256], f32>) -> !relax.tensor<["b*s", 256], f32>
// CHECK: %[[R:.*]] = "relax.reshape"(%[[C]]) {shape = ["b", "s", 256]} : (!relax.tensor<["b*s", 256], f32>) -> !relax.tensor<["b", "s", 256], f32>
// CHECK: return %[[R]]
// KERNEL-LABEL: func.func @three_d
// KERNEL: "relax_v.call_tir"(%{{.*}}, %{{.*}}) {callee = @[[F:sgemm_versions]]}
// KERNEL: func.func private @[[F]](%[[A:.*]]: tensor<?x1024xf32>, %[[B:.*]]: tensor<1024x256xf32>, %{{.*}}: tensor<?x256xf32>)
// KERNEL: %[[M:.*]] = tensor.dim %[[A]]
// KERNEL: arith.cmpi ule, %[[M]]
// KERNEL: relax.library = "sgemm"
// KERNEL: arith.cmpi ule, %[[M]]
// KERNEL: linalg.matmul {relax_mlir.matmul_variant = "small"}
// KERNEL: arith.cmpi ule, %[[M]]
// KERNEL: linalg.matmul {relax_mlir.matmul_variant = "medium"}
// KERNEL: relax.library = "sgemm"
// NEVER-LABEL: func.func @three_d
// NEVER-NOT: relax.reshape
// NEVER: "relax.matmul"
func.func @three_d(%x: !relax.tensor<["b", "s", 1024], f32>, %w: !relax.tensor<[1024, 256], f32>) -> !relax.tensor<["b", "s", 256], f32> {
  %m = "relax.matmul"(%x, %w) : (!relax.tensor<["b", "s", 1024], f32>, !relax.tensor<[1024, 256], f32>) -> !relax.tensor<["b", "s", 256], f32>
  return %m : !relax.tensor<["b", "s", 256], f32>
}
