// RUN: relax-opt %s --split-input-file --relax-legalize --relax-fuse-kernels | FileCheck %s

// An add -> relu -> exp chain (and a broadcast bias add after it) becomes one call_tir of one
// kernel holding one linalg.generic; the unfused kernels are gone.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%[[X:.*]]: !relax.tensor<["n", 32], f32>, %[[Y:.*]]: !relax.tensor<["n", 32], f32>, %[[B:.*]]: !relax.tensor<[32], f32>) -> !relax.tensor<["n", 32], f32>
// CHECK-NEXT: %[[R:.*]] = "relax_v.call_tir"(%[[X]], %[[Y]], %[[B]]) {callee = @[[K:.*]]} : (!relax.tensor<["n", 32], f32>, !relax.tensor<["n", 32], f32>, !relax.tensor<[32], f32>) -> !relax.tensor<["n", 32], f32>
// CHECK-NOT: "relax_v.call_tir"
// CHECK-NEXT: return %[[R]] : !relax.tensor<["n", 32], f32>
// CHECK: func.func private @[[K]](%{{.*}}: tensor<?x32xf32>, %{{.*}}: tensor<?x32xf32>, %{{.*}}: tensor<32xf32>, %[[OUT:.*]]: tensor<?x32xf32>) -> tensor<?x32xf32>
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
// CHECK-SAME: outs(%[[OUT]] : tensor<?x32xf32>)
// CHECK: arith.addf
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: arith.addf
// CHECK-NOT: linalg.generic
// CHECK: return
// CHECK-NOT: func.func private @relu
// CHECK-NOT: func.func private @exp
func.func @chain(%x: !relax.tensor<["n", 32], f32>, %y: !relax.tensor<["n", 32], f32>, %b: !relax.tensor<[32], f32>) -> !relax.tensor<["?", "?"], f32> {
  %0 = "relax.add"(%x, %y) : (!relax.tensor<["n", 32], f32>, !relax.tensor<["n", 32], f32>) -> !relax.tensor<["?", "?"], f32>
  %1 = "relax.relu"(%0) : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  %2 = "relax.exp"(%1) : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  %3 = "relax.add"(%2, %b) : (!relax.tensor<["?", "?"], f32>, !relax.tensor<[32], f32>) -> !relax.tensor<["?", "?"], f32>
  return %3 : !relax.tensor<["?", "?"], f32>
}

// -----

// Not fused: a matmul producer (its epilogue would cost the matmul its fast schedule) and an
// intermediate that the consumer broadcasts (exp's [32] into ["n", 32]). A cheap producer with a
// second use (relu, also returned) is recomputed inside the consumer (XLA-style duplication).
// CHECK-LABEL: func.func @nofuse
// CHECK-SAME: (%[[X:.*]]: !relax.tensor<["n", 64], f32>, %[[W:.*]]: !relax.tensor<[64, 32], f32>, %[[V:.*]]: !relax.tensor<[32], f32>, %[[Z:.*]]: !relax.tensor<["n", 32], f32>) -> (!relax.tensor<["n", 32], f32>, !relax.tensor<["n", 32], f32>)
// CHECK-NEXT: %[[M:.*]] = "relax_v.call_tir"(%[[X]], %[[W]]) {callee = @matmul}
// CHECK-NEXT: %[[R:.*]] = "relax_v.call_tir"(%[[M]]) {callee = @relu}
// CHECK-NEXT: %[[E:.*]] = "relax_v.call_tir"(%[[V]]) {callee = @exp}
// CHECK-NEXT: %[[S:.*]] = "relax_v.call_tir"(%[[Z]], %[[E]], %[[M]]) {callee = @fused_add_relu_relu_add_multiply}
// CHECK-NEXT: return %[[R]], %[[S]] : !relax.tensor<["n", 32], f32>, !relax.tensor<["n", 32], f32>
// CHECK: func.func private @matmul(
// CHECK-NEXT: arith.constant
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: linalg.matmul
// CHECK-NEXT: return
func.func @nofuse(%x: !relax.tensor<["n", 64], f32>, %w: !relax.tensor<[64, 32], f32>, %v: !relax.tensor<[32], f32>, %z: !relax.tensor<["n", 32], f32>) -> (!relax.tensor<["?", "?"], f32>, !relax.tensor<["?", "?"], f32>) {
  %0 = "relax.matmul"(%x, %w) : (!relax.tensor<["n", 64], f32>, !relax.tensor<[64, 32], f32>) -> !relax.tensor<["?", "?"], f32>
  %1 = "relax.relu"(%0) : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  %2 = "relax.add"(%1, %1) : (!relax.tensor<["?", "?"], f32>, !relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  %3 = "relax.exp"(%v) : (!relax.tensor<[32], f32>) -> !relax.tensor<["?"], f32>
  %4 = "relax.add"(%z, %3) : (!relax.tensor<["n", 32], f32>, !relax.tensor<["?"], f32>) -> !relax.tensor<["?", "?"], f32>
  %5 = "relax.multiply"(%2, %4) : (!relax.tensor<["?", "?"], f32>, !relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  return %1, %5 : !relax.tensor<["?", "?"], f32>, !relax.tensor<["?", "?"], f32>
}

// -----

// A reduction takes its elementwise prologue: softmax's exp(x - max) is computed inside the
// sum's loop nest (no [n, m] intermediate reaches memory). Not fused: a prologue whose dims no
// input of the fused kernel carries (the broadcast_to's [n, m] from a [m] vector).
// CHECK-LABEL: func.func @prologue
// CHECK-SAME: (%[[X:[a-z0-9]+]]: !relax.tensor<["n", "m"], f32>
// CHECK-NEXT: %[[MAX:.*]] = "relax_v.call_tir"(%[[X]]) {callee = @max}
// CHECK-NEXT: %[[SUM:.*]] = "relax_v.call_tir"(%[[X]], %[[MAX]]) {callee = @[[K:fused_subtract_exp_sum]]} : (!relax.tensor<["n", "m"], f32>, !relax.tensor<["n", 1], f32>) -> !relax.tensor<["n"], f32>
// CHECK-NEXT: %[[E:.*]] = "relax_v.call_tir"(%{{.*}}) {callee = @exp_1}
// CHECK-NEXT: %[[B:.*]] = "relax_v.call_tir"(%[[E]]) {callee = @broadcast_to}
// CHECK-NEXT: "relax_v.call_tir"(%[[B]]) {callee = @sum}
// CHECK: func.func private @[[K]](%[[IN:.*]]: tensor<?x?xf32>, %{{.*}}: tensor<?x1xf32>, %[[OUT:.*]]: tensor<?xf32>) -> tensor<?xf32>
// CHECK: %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[OUT]] : tensor<?xf32>)
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction"]
// CHECK-SAME: outs(%[[F]] : tensor<?xf32>)
// CHECK: arith.subf
// CHECK: math.exp
// CHECK: arith.addf
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @prologue(%x: !relax.tensor<["n", "m"], f32>, %v: !relax.tensor<["m"], f32>) -> (!relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>) {
  %0 = "relax.max"(%x) {axes = [1], keepdims = true} : (!relax.tensor<["n", "m"], f32>) -> !relax.tensor<["n", 1], f32>
  %1 = "relax.subtract"(%x, %0) : (!relax.tensor<["n", "m"], f32>, !relax.tensor<["n", 1], f32>) -> !relax.tensor<["n", "m"], f32>
  %2 = "relax.exp"(%1) : (!relax.tensor<["n", "m"], f32>) -> !relax.tensor<["n", "m"], f32>
  %3 = "relax.sum"(%2) {axes = [1]} : (!relax.tensor<["n", "m"], f32>) -> !relax.tensor<["n"], f32>
  %4 = "relax.exp"(%v) : (!relax.tensor<["m"], f32>) -> !relax.tensor<["m"], f32>
  %5 = "relax.broadcast_to"(%4) {shape = ["n", "m"]} : (!relax.tensor<["m"], f32>) -> !relax.tensor<["n", "m"], f32>
  %6 = "relax.sum"(%5) {axes = [1]} : (!relax.tensor<["n", "m"], f32>) -> !relax.tensor<["n"], f32>
  return %3, %6 : !relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>
}

// -----

// Splat constants become constants in the kernel body: the fused kernel takes x and its output
// only (the [1, 1] scale and the [] bias were call_tir operands before).
// CHECK-LABEL: func.func @consts
// CHECK: %{{.*}} = "relax_v.call_tir"(%{{[a-z0-9]+}}) {callee = @[[K:.*]]} : (!relax.tensor<["n", 8], f32>) -> !relax.tensor<["n", 8], f32>
// CHECK: func.func private @[[K]](%{{.*}}: tensor<?x8xf32>, %[[OUT:.*]]: tensor<?x8xf32>) -> tensor<?x8xf32>
// CHECK-DAG: arith.constant 2.500000e-01 : f32
// CHECK-DAG: arith.constant 3.000000e+00 : f32
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}} : tensor<?x8xf32>) outs(%[[OUT]] : tensor<?x8xf32>)
func.func @consts(%x: !relax.tensor<["n", 8], f32>) -> !relax.tensor<["n", 8], f32> {
  %c = "relax.constant"() {value = dense<0.25> : tensor<f32>} : () -> !relax.tensor<[], f32>
  %c2 = "relax.reshape"(%c) {shape = [1, 1]} : (!relax.tensor<[], f32>) -> !relax.tensor<[1, 1], f32>
  %b = "relax.constant"() {value = dense<3.0> : tensor<f32>} : () -> !relax.tensor<[], f32>
  %0 = "relax.multiply"(%x, %c2) : (!relax.tensor<["n", 8], f32>, !relax.tensor<[1, 1], f32>) -> !relax.tensor<["n", 8], f32>
  %1 = "relax.add"(%0, %b) : (!relax.tensor<["n", 8], f32>, !relax.tensor<[], f32>) -> !relax.tensor<["n", 8], f32>
  return %1 : !relax.tensor<["n", 8], f32>
}
