// RUN: relax-opt %s --split-input-file '--relax-fuse-attention=min_keys=0 min_queries=0' | FileCheck %s
// RUN: relax-opt %s --split-input-file '--relax-fuse-attention=min_keys=0 min_queries=0' --relax-legalize | FileCheck %s --check-prefix=KERNEL
// RUN: relax-opt %s --split-input-file --relax-fuse-attention | FileCheck %s --check-prefix=VERSION
// RUN: relax-opt %s --split-input-file --relax-fuse-attention --relax-infer-shapes --relax-legalize | FileCheck %s --check-prefix=VLEGAL

// min_keys=0 min_queries=0: every chain is one relax.attention. By default (min_keys = 256,
// min_queries = 32) symbolic key and query lengths are versioned: relax_v.if(Sk < 256 or Sq < 32)
// runs the unfused chain (then) or relax.attention (else), two private region functions next to
// the caller; a static length below its limit stays unfused.

// jax's causal attention after relax-canonicalize: scale by division, where-mask from two iotas,
// max-subtracted softmax (with jax's maximum(-inf, max)), product with v: one relax.attention.
// CHECK-LABEL: func.func @causal
// CHECK-SAME: (%[[Q:.*]]: !relax.tensor<["s", 64], f32>, %[[K:.*]]: !relax.tensor<["s", 64], f32>, %[[V:.*]]: !relax.tensor<["s", 32], f32>)
// CHECK-NOT: "relax.matmul"
// CHECK: %[[R:.*]] = "relax.attention"(%[[Q]], %[[K]], %[[V]]) {divisor = 8.000000e+00 : f32, fill = -1.000000e+09 : f32, mask = "causal"} : {{.*}} -> !relax.tensor<["s", 32], f32>
// CHECK-NOT: "relax.exp"
// CHECK-NOT: "relax.where"
// CHECK-NOT: "relax.arange"
// CHECK: return %[[R]]
// The kernel: key tiles in an scf.for inside an scf.forall over query blocks, a running max
// (maximumf), the rescale exp(m_old - m_new), p = exp(s - m_new) and the product with v.
// KERNEL-LABEL: func.func @causal
// KERNEL: "relax_v.call_tir"(%{{.*}}, %{{.*}}, %{{.*}}) {callee = @[[F:attention]]}
// KERNEL: func.func private @[[F]](
// KERNEL: scf.forall
// KERNEL: scf.for %{{.*}} = %{{.*}} to %[[NKB:.*]] step
// KERNEL: vector.fma
// KERNEL: arith.cmpi sge
// KERNEL: arith.maximumf
// KERNEL: math.exp
// KERNEL: math.exp
// KERNEL: vector.fma
// KERNEL: scf.forall.in_parallel
// The versioned form: the short branch is the unfused chain relax-expand-attention builds (the
// mask from two aranges), the long one the fused op; the predicate is the key length s < 256.
// VERSION-LABEL: func.func private @causal_attention0_short
// VERSION-SAME: (%[[SQ:.*]]: !relax.tensor<["s", 64], f32>, %[[SK:.*]]: !relax.tensor<["s", 64], f32>, %[[SV:.*]]: !relax.tensor<["s", 32], f32>) -> !relax.tensor<["s", 32], f32> attributes {relax.region}
// VERSION-NOT: "relax.attention"
// VERSION: %[[KT:.*]] = "relax.permute_dims"(%[[SK]])
// VERSION: "relax.matmul"(%[[SQ]], %[[KT]])
// VERSION: "relax.where"
// VERSION: "relax.exp"
// VERSION: %[[P:.*]] = "relax.divide"
// VERSION: %[[O:.*]] = "relax.matmul"(%[[P]], %[[SV]])
// VERSION: return %[[O]]
// VERSION-LABEL: func.func private @causal_attention0_fused
// VERSION-SAME: (%[[FQ:.*]]: !relax.tensor<["s", 64], f32>, %[[FK:.*]]: !relax.tensor<["s", 64], f32>, %[[FV:.*]]: !relax.tensor<["s", 32], f32>) -> !relax.tensor<["s", 32], f32> attributes {relax.region}
// VERSION-NEXT: %[[A:.*]] = "relax.attention"(%[[FQ]], %[[FK]], %[[FV]]) {divisor = 8.000000e+00 : f32, fill = -1.000000e+09 : f32, mask = "causal"}
// VERSION-NEXT: return %[[A]]
// VERSION-LABEL: func.func @causal
// VERSION-SAME: (%[[Q:.*]]: !relax.tensor<["s", 64], f32>, %[[K:.*]]: !relax.tensor<["s", 64], f32>, %[[V:.*]]: !relax.tensor<["s", 32], f32>)
// VERSION-NOT: "relax.exp"
// VERSION: %[[N1:.*]] = "relax.arange"() {dtype = i64, end = "s + 1", start = "s"} : () -> !relax.tensor<[1], i64>
// VERSION: %[[N:.*]] = "relax.reshape"(%[[N1]]) {shape = []}
// VERSION: %[[LIM:.*]] = "relax.constant"() {value = dense<256> : tensor<i64>}
// VERSION: %[[PRED:.*]] = "relax.less"(%[[N]], %[[LIM]]) : {{.*}} -> !relax.tensor<[], i1>
// VERSION: %[[R:.*]] = "relax_v.if"(%[[PRED]], %[[Q]], %[[K]], %[[V]]) {else_branch = @causal_attention0_fused, then_branch = @causal_attention0_short}
// VERSION-NOT: "relax.matmul"
// VERSION: return %[[R]]
// Legalized: the fused branch is the flash kernel, the short one separate kernels.
// VLEGAL-LABEL: func.func private @causal_attention0_short
// VLEGAL-NOT: callee = @attention
// VLEGAL: "relax_v.call_tir"
// VLEGAL-LABEL: func.func private @causal_attention0_fused
// VLEGAL: "relax_v.call_tir"(%{{.*}}, %{{.*}}, %{{.*}}) {callee = @attention
// VLEGAL-LABEL: func.func @causal
// VLEGAL: "relax_v.if"
func.func @causal(%q: !relax.tensor<["s", 64], f32>, %k: !relax.tensor<["s", 64], f32>, %v: !relax.tensor<["s", 32], f32>) -> !relax.tensor<["s", 32], f32> {
  %ninf = "relax.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> !relax.tensor<[], f32>
  %fill = "relax.constant"() {value = dense<-1.000000e+09> : tensor<f32>} : () -> !relax.tensor<[], f32>
  %c8 = "relax.constant"() {value = dense<8.0> : tensor<f32>} : () -> !relax.tensor<[], f32>
  %kt = "relax.permute_dims"(%k) {axes = [1, 0]} : (!relax.tensor<["s", 64], f32>) -> !relax.tensor<[64, "s"], f32>
  %s = "relax.matmul"(%q, %kt) : (!relax.tensor<["s", 64], f32>, !relax.tensor<[64, "s"], f32>) -> !relax.tensor<["s", "s"], f32>
  %sd = "relax.divide"(%s, %c8) : (!relax.tensor<["s", "s"], f32>, !relax.tensor<[], f32>) -> !relax.tensor<["s", "s"], f32>
  %i0 = "relax.arange"() {dtype = i32, end = "s"} : () -> !relax.tensor<["s"], i32>
  %one = "relax.constant"() {value = dense<1> : tensor<i32>} : () -> !relax.tensor<[], i32>
  %zero = "relax.constant"() {value = dense<0> : tensor<i32>} : () -> !relax.tensor<[], i32>
  %i1 = "relax.multiply"(%one, %i0) : (!relax.tensor<[], i32>, !relax.tensor<["s"], i32>) -> !relax.tensor<["s"], i32>
  %i2 = "relax.add"(%zero, %i1) : (!relax.tensor<[], i32>, !relax.tensor<["s"], i32>) -> !relax.tensor<["s"], i32>
  %rows = "relax.reshape"(%i2) {shape = ["s", 1]} : (!relax.tensor<["s"], i32>) -> !relax.tensor<["s", 1], i32>
  %j0 = "relax.arange"() {dtype = i32, end = "s"} : () -> !relax.tensor<["s"], i32>
  %cols = "relax.reshape"(%j0) {shape = [1, "s"]} : (!relax.tensor<["s"], i32>) -> !relax.tensor<[1, "s"], i32>
  %rb = "relax.broadcast_to"(%rows) {shape = ["s", "s"]} : (!relax.tensor<["s", 1], i32>) -> !relax.tensor<["s", "s"], i32>
  %cb = "relax.broadcast_to"(%cols) {shape = ["s", "s"]} : (!relax.tensor<[1, "s"], i32>) -> !relax.tensor<["s", "s"], i32>
  %mask = "relax.greater_equal"(%rb, %cb) : (!relax.tensor<["s", "s"], i32>, !relax.tensor<["s", "s"], i32>) -> !relax.tensor<["s", "s"], i1>
  %x = "relax.where"(%mask, %sd, %fill) : (!relax.tensor<["s", "s"], i1>, !relax.tensor<["s", "s"], f32>, !relax.tensor<[], f32>) -> !relax.tensor<["s", "s"], f32>
  %mx = "relax.max"(%x) {axes = [1], keepdims = false} : (!relax.tensor<["s", "s"], f32>) -> !relax.tensor<["s"], f32>
  %mm = "relax.maximum"(%ninf, %mx) : (!relax.tensor<[], f32>, !relax.tensor<["s"], f32>) -> !relax.tensor<["s"], f32>
  %mr = "relax.reshape"(%mm) {shape = ["s", 1]} : (!relax.tensor<["s"], f32>) -> !relax.tensor<["s", 1], f32>
  %d = "relax.subtract"(%x, %mr) : (!relax.tensor<["s", "s"], f32>, !relax.tensor<["s", 1], f32>) -> !relax.tensor<["s", "s"], f32>
  %e = "relax.exp"(%d) : (!relax.tensor<["s", "s"], f32>) -> !relax.tensor<["s", "s"], f32>
  %sum = "relax.sum"(%e) {axes = [-1], keepdims = false} : (!relax.tensor<["s", "s"], f32>) -> !relax.tensor<["s"], f32>
  %sr = "relax.reshape"(%sum) {shape = ["s", 1]} : (!relax.tensor<["s"], f32>) -> !relax.tensor<["s", 1], f32>
  %p = "relax.divide"(%e, %sr) : (!relax.tensor<["s", "s"], f32>, !relax.tensor<["s", 1], f32>) -> !relax.tensor<["s", "s"], f32>
  %o = "relax.matmul"(%p, %v) : (!relax.tensor<["s", "s"], f32>, !relax.tensor<["s", 32], f32>) -> !relax.tensor<["s", 32], f32>
  return %o : !relax.tensor<["s", 32], f32>
}

// -----

// Batched multi-head attention with a multiplied scale.
// CHECK-LABEL: func.func @heads
// CHECK-SAME: (%[[Q:.*]]: !relax.tensor<[2, 4, "s", 64], f32>, %[[K:.*]]: !relax.tensor<[2, 4, "t", 64], f32>, %[[V:.*]]: !relax.tensor<[2, 4, "t", 64], f32>)
// CHECK: %[[R:.*]] = "relax.attention"(%[[Q]], %[[K]], %[[V]]) {scale = 1.250000e-01 : f32} : {{.*}} -> !relax.tensor<[2, 4, "s", 64], f32>
// CHECK-NEXT: return %[[R]]
// Versioned on the key length "t" (< 256) and the query length "s" (< 32).
// VERSION-LABEL: func.func @heads
// VERSION: %[[NT:.*]] = "relax.arange"() {dtype = i64, end = "t + 1", start = "t"}
// VERSION: %[[LT:.*]] = "relax.constant"() {value = dense<256> : tensor<i64>}
// VERSION: %[[CT:.*]] = "relax.less"(%{{.*}}, %[[LT]])
// VERSION: %[[NS:.*]] = "relax.arange"() {dtype = i64, end = "s + 1", start = "s"}
// VERSION: %[[LS:.*]] = "relax.constant"() {value = dense<32> : tensor<i64>}
// VERSION: %[[CS:.*]] = "relax.less"(%{{.*}}, %[[LS]])
// VERSION: %[[P:.*]] = "relax.logical_or"(%[[CT]], %[[CS]])
// VERSION: "relax_v.if"(%[[P]],
func.func @heads(%q: !relax.tensor<[2, 4, "s", 64], f32>, %k: !relax.tensor<[2, 4, "t", 64], f32>, %v: !relax.tensor<[2, 4, "t", 64], f32>) -> !relax.tensor<[2, 4, "s", 64], f32> {
  %c = "relax.constant"() {value = dense<1.250000e-01> : tensor<f32>} : () -> !relax.tensor<[], f32>
  %kt = "relax.permute_dims"(%k) {axes = [0, 1, 3, 2]} : (!relax.tensor<[2, 4, "t", 64], f32>) -> !relax.tensor<[2, 4, 64, "t"], f32>
  %s = "relax.matmul"(%q, %kt) : (!relax.tensor<[2, 4, "s", 64], f32>, !relax.tensor<[2, 4, 64, "t"], f32>) -> !relax.tensor<[2, 4, "s", "t"], f32>
  %x = "relax.multiply"(%s, %c) : (!relax.tensor<[2, 4, "s", "t"], f32>, !relax.tensor<[], f32>) -> !relax.tensor<[2, 4, "s", "t"], f32>
  %mx = "relax.max"(%x) {axes = [3], keepdims = true} : (!relax.tensor<[2, 4, "s", "t"], f32>) -> !relax.tensor<[2, 4, "s", 1], f32>
  %d = "relax.subtract"(%x, %mx) : (!relax.tensor<[2, 4, "s", "t"], f32>, !relax.tensor<[2, 4, "s", 1], f32>) -> !relax.tensor<[2, 4, "s", "t"], f32>
  %e = "relax.exp"(%d) : (!relax.tensor<[2, 4, "s", "t"], f32>) -> !relax.tensor<[2, 4, "s", "t"], f32>
  %sum = "relax.sum"(%e) {axes = [3], keepdims = true} : (!relax.tensor<[2, 4, "s", "t"], f32>) -> !relax.tensor<[2, 4, "s", 1], f32>
  %p = "relax.divide"(%e, %sum) : (!relax.tensor<[2, 4, "s", "t"], f32>, !relax.tensor<[2, 4, "s", 1], f32>) -> !relax.tensor<[2, 4, "s", "t"], f32>
  %o = "relax.matmul"(%p, %v) : (!relax.tensor<[2, 4, "s", "t"], f32>, !relax.tensor<[2, 4, "t", 64], f32>) -> !relax.tensor<[2, 4, "s", 64], f32>
  return %o : !relax.tensor<[2, 4, "s", 64], f32>
}

// -----

// Negative: the probabilities are also returned (used twice): nothing is fused.
// CHECK-LABEL: func.func @probs_used_twice
// CHECK-NOT: "relax.attention"
// CHECK: "relax.exp"
// CHECK: %[[P:.*]] = "relax.divide"
// CHECK: %[[O:.*]] = "relax.matmul"(%[[P]],
// CHECK: return %[[O]], %[[P]]
func.func @probs_used_twice(%q: !relax.tensor<["s", 64], f32>, %k: !relax.tensor<["s", 64], f32>, %v: !relax.tensor<["s", 64], f32>) -> (!relax.tensor<["s", 64], f32>, !relax.tensor<["s", "s"], f32>) {
  %kt = "relax.permute_dims"(%k) {axes = [1, 0]} : (!relax.tensor<["s", 64], f32>) -> !relax.tensor<[64, "s"], f32>
  %s = "relax.matmul"(%q, %kt) : (!relax.tensor<["s", 64], f32>, !relax.tensor<[64, "s"], f32>) -> !relax.tensor<["s", "s"], f32>
  %mx = "relax.max"(%s) {axes = [1], keepdims = true} : (!relax.tensor<["s", "s"], f32>) -> !relax.tensor<["s", 1], f32>
  %d = "relax.subtract"(%s, %mx) : (!relax.tensor<["s", "s"], f32>, !relax.tensor<["s", 1], f32>) -> !relax.tensor<["s", "s"], f32>
  %e = "relax.exp"(%d) : (!relax.tensor<["s", "s"], f32>) -> !relax.tensor<["s", "s"], f32>
  %sum = "relax.sum"(%e) {axes = [1], keepdims = true} : (!relax.tensor<["s", "s"], f32>) -> !relax.tensor<["s", 1], f32>
  %p = "relax.divide"(%e, %sum) : (!relax.tensor<["s", "s"], f32>, !relax.tensor<["s", 1], f32>) -> !relax.tensor<["s", "s"], f32>
  %o = "relax.matmul"(%p, %v) : (!relax.tensor<["s", "s"], f32>, !relax.tensor<["s", 64], f32>) -> !relax.tensor<["s", 64], f32>
  return %o, %p : !relax.tensor<["s", 64], f32>, !relax.tensor<["s", "s"], f32>
}

// -----

// Negative: softmax over the query axis (axes = [0]) is not attention.
// CHECK-LABEL: func.func @other_axis
// CHECK-NOT: "relax.attention"
// CHECK: "relax.max"(%{{.*}}) {axes = [0]
// CHECK: "relax.exp"
func.func @other_axis(%q: !relax.tensor<["s", 64], f32>, %k: !relax.tensor<["s", 64], f32>, %v: !relax.tensor<["s", 64], f32>) -> !relax.tensor<["s", 64], f32> {
  %kt = "relax.permute_dims"(%k) {axes = [1, 0]} : (!relax.tensor<["s", 64], f32>) -> !relax.tensor<[64, "s"], f32>
  %s = "relax.matmul"(%q, %kt) : (!relax.tensor<["s", 64], f32>, !relax.tensor<[64, "s"], f32>) -> !relax.tensor<["s", "s"], f32>
  %mx = "relax.max"(%s) {axes = [0], keepdims = true} : (!relax.tensor<["s", "s"], f32>) -> !relax.tensor<[1, "s"], f32>
  %d = "relax.subtract"(%s, %mx) : (!relax.tensor<["s", "s"], f32>, !relax.tensor<[1, "s"], f32>) -> !relax.tensor<["s", "s"], f32>
  %e = "relax.exp"(%d) : (!relax.tensor<["s", "s"], f32>) -> !relax.tensor<["s", "s"], f32>
  %sum = "relax.sum"(%e) {axes = [0], keepdims = true} : (!relax.tensor<["s", "s"], f32>) -> !relax.tensor<[1, "s"], f32>
  %p = "relax.divide"(%e, %sum) : (!relax.tensor<["s", "s"], f32>, !relax.tensor<[1, "s"], f32>) -> !relax.tensor<["s", "s"], f32>
  %o = "relax.matmul"(%p, %v) : (!relax.tensor<["s", "s"], f32>, !relax.tensor<["s", 64], f32>) -> !relax.tensor<["s", 64], f32>
  return %o : !relax.tensor<["s", 64], f32>
}

// -----

// Static lengths: 64 keys stay unfused by default (below 256); 512 keys and 40 queries are fused
// without a branch; 512 keys and 7 queries stay unfused (below 32 rows).
// CHECK-LABEL: func.func @static_short
// CHECK: "relax.attention"
// VERSION-LABEL: func.func @static_short
// VERSION-NOT: "relax_v.if"
// VERSION-NOT: "relax.attention"
// VERSION: "relax.exp"
// VERSION: return
func.func @static_short(%q: !relax.tensor<[64, 32], f32>, %k: !relax.tensor<[64, 32], f32>, %v: !relax.tensor<[64, 32], f32>) -> !relax.tensor<[64, 32], f32> {
  %kt = "relax.permute_dims"(%k) {axes = [1, 0]} : (!relax.tensor<[64, 32], f32>) -> !relax.tensor<[32, 64], f32>
  %s = "relax.matmul"(%q, %kt) : (!relax.tensor<[64, 32], f32>, !relax.tensor<[32, 64], f32>) -> !relax.tensor<[64, 64], f32>
  %mx = "relax.max"(%s) {axes = [1], keepdims = true} : (!relax.tensor<[64, 64], f32>) -> !relax.tensor<[64, 1], f32>
  %d = "relax.subtract"(%s, %mx) : (!relax.tensor<[64, 64], f32>, !relax.tensor<[64, 1], f32>) -> !relax.tensor<[64, 64], f32>
  %e = "relax.exp"(%d) : (!relax.tensor<[64, 64], f32>) -> !relax.tensor<[64, 64], f32>
  %sum = "relax.sum"(%e) {axes = [1], keepdims = true} : (!relax.tensor<[64, 64], f32>) -> !relax.tensor<[64, 1], f32>
  %p = "relax.divide"(%e, %sum) : (!relax.tensor<[64, 64], f32>, !relax.tensor<[64, 1], f32>) -> !relax.tensor<[64, 64], f32>
  %o = "relax.matmul"(%p, %v) : (!relax.tensor<[64, 64], f32>, !relax.tensor<[64, 32], f32>) -> !relax.tensor<[64, 32], f32>
  return %o : !relax.tensor<[64, 32], f32>
}

// -----

// CHECK-LABEL: func.func @static_long
// VERSION-LABEL: func.func @static_long
// VERSION-SAME: (%[[Q:.*]]: !relax.tensor<[40, 32], f32>, %[[K:.*]]: !relax.tensor<[512, 32], f32>, %[[V:.*]]: !relax.tensor<[512, 32], f32>)
// VERSION-NOT: "relax_v.if"
// VERSION: %[[R:.*]] = "relax.attention"(%[[Q]], %[[K]], %[[V]])
// VERSION-NEXT: return %[[R]]
func.func @static_long(%q: !relax.tensor<[40, 32], f32>, %k: !relax.tensor<[512, 32], f32>, %v: !relax.tensor<[512, 32], f32>) -> !relax.tensor<[40, 32], f32> {
  %kt = "relax.permute_dims"(%k) {axes = [1, 0]} : (!relax.tensor<[512, 32], f32>) -> !relax.tensor<[32, 512], f32>
  %s = "relax.matmul"(%q, %kt) : (!relax.tensor<[40, 32], f32>, !relax.tensor<[32, 512], f32>) -> !relax.tensor<[40, 512], f32>
  %mx = "relax.max"(%s) {axes = [1], keepdims = true} : (!relax.tensor<[40, 512], f32>) -> !relax.tensor<[40, 1], f32>
  %d = "relax.subtract"(%s, %mx) : (!relax.tensor<[40, 512], f32>, !relax.tensor<[40, 1], f32>) -> !relax.tensor<[40, 512], f32>
  %e = "relax.exp"(%d) : (!relax.tensor<[40, 512], f32>) -> !relax.tensor<[40, 512], f32>
  %sum = "relax.sum"(%e) {axes = [1], keepdims = true} : (!relax.tensor<[40, 512], f32>) -> !relax.tensor<[40, 1], f32>
  %p = "relax.divide"(%e, %sum) : (!relax.tensor<[40, 512], f32>, !relax.tensor<[40, 1], f32>) -> !relax.tensor<[40, 512], f32>
  %o = "relax.matmul"(%p, %v) : (!relax.tensor<[40, 512], f32>, !relax.tensor<[512, 32], f32>) -> !relax.tensor<[40, 32], f32>
  return %o : !relax.tensor<[40, 32], f32>
}

// -----

// CHECK-LABEL: func.func @static_few_queries
// CHECK: "relax.attention"
// VERSION-LABEL: func.func @static_few_queries
// VERSION-NOT: "relax_v.if"
// VERSION-NOT: "relax.attention"
// VERSION: "relax.exp"
func.func @static_few_queries(%q: !relax.tensor<[7, 32], f32>, %k: !relax.tensor<[512, 32], f32>, %v: !relax.tensor<[512, 32], f32>) -> !relax.tensor<[7, 32], f32> {
  %kt = "relax.permute_dims"(%k) {axes = [1, 0]} : (!relax.tensor<[512, 32], f32>) -> !relax.tensor<[32, 512], f32>
  %s = "relax.matmul"(%q, %kt) : (!relax.tensor<[7, 32], f32>, !relax.tensor<[32, 512], f32>) -> !relax.tensor<[7, 512], f32>
  %mx = "relax.max"(%s) {axes = [1], keepdims = true} : (!relax.tensor<[7, 512], f32>) -> !relax.tensor<[7, 1], f32>
  %d = "relax.subtract"(%s, %mx) : (!relax.tensor<[7, 512], f32>, !relax.tensor<[7, 1], f32>) -> !relax.tensor<[7, 512], f32>
  %e = "relax.exp"(%d) : (!relax.tensor<[7, 512], f32>) -> !relax.tensor<[7, 512], f32>
  %sum = "relax.sum"(%e) {axes = [1], keepdims = true} : (!relax.tensor<[7, 512], f32>) -> !relax.tensor<[7, 1], f32>
  %p = "relax.divide"(%e, %sum) : (!relax.tensor<[7, 512], f32>, !relax.tensor<[7, 1], f32>) -> !relax.tensor<[7, 512], f32>
  %o = "relax.matmul"(%p, %v) : (!relax.tensor<[7, 512], f32>, !relax.tensor<[512, 32], f32>) -> !relax.tensor<[7, 32], f32>
  return %o : !relax.tensor<[7, 32], f32>
}

// -----

// A key length that is an expression ("t + 1", a cache plus the new token): inside the region
// functions it is a fresh symbol (relax-infer-shapes' rule for dims not bound by a parameter);
// the predicate reads the caller's "t + 1".
// VERSION-LABEL: func.func private @grown_attention0_short
// VERSION-SAME: (%{{.*}}: !relax.tensor<[40, 32], f32>, %{{.*}}: !relax.tensor<["grown_attention0_short_s0", 32], f32>, %{{.*}}: !relax.tensor<["grown_attention0_short_s0", 32], f32>) -> !relax.tensor<[40, 32], f32>
// VERSION: "relax.matmul"{{.*}} -> !relax.tensor<[40, "grown_attention0_short_s0"], f32>
// VERSION-LABEL: func.func private @grown_attention0_fused
// VERSION-SAME: !relax.tensor<["grown_attention0_fused_s0", 32], f32>
// VERSION-LABEL: func.func @grown
// VERSION: "relax.arange"() {dtype = i64, end = "t + 2", start = "t + 1"}
// VERSION: "relax_v.if"
// VLEGAL-LABEL: func.func @grown
// VLEGAL: "relax_v.if"
func.func @grown(%q: !relax.tensor<[40, 32], f32>, %k: !relax.tensor<["t + 1", 32], f32>, %v: !relax.tensor<["t + 1", 32], f32>, %pad: !relax.tensor<["t"], f32>) -> !relax.tensor<[40, 32], f32> {
  %kt = "relax.permute_dims"(%k) {axes = [1, 0]} : (!relax.tensor<["t + 1", 32], f32>) -> !relax.tensor<[32, "t + 1"], f32>
  %s = "relax.matmul"(%q, %kt) : (!relax.tensor<[40, 32], f32>, !relax.tensor<[32, "t + 1"], f32>) -> !relax.tensor<[40, "t + 1"], f32>
  %mx = "relax.max"(%s) {axes = [1], keepdims = true} : (!relax.tensor<[40, "t + 1"], f32>) -> !relax.tensor<[40, 1], f32>
  %d = "relax.subtract"(%s, %mx) : (!relax.tensor<[40, "t + 1"], f32>, !relax.tensor<[40, 1], f32>) -> !relax.tensor<[40, "t + 1"], f32>
  %e = "relax.exp"(%d) : (!relax.tensor<[40, "t + 1"], f32>) -> !relax.tensor<[40, "t + 1"], f32>
  %sum = "relax.sum"(%e) {axes = [1], keepdims = true} : (!relax.tensor<[40, "t + 1"], f32>) -> !relax.tensor<[40, 1], f32>
  %p = "relax.divide"(%e, %sum) : (!relax.tensor<[40, "t + 1"], f32>, !relax.tensor<[40, 1], f32>) -> !relax.tensor<[40, "t + 1"], f32>
  %o = "relax.matmul"(%p, %v) : (!relax.tensor<[40, "t + 1"], f32>, !relax.tensor<["t + 1", 32], f32>) -> !relax.tensor<[40, 32], f32>
  return %o : !relax.tensor<[40, 32], f32>
}

// -----

// Grouped-query attention after relax-canonicalize (ops/grouped.py: 16 query heads over 4 KV
// heads): the products run on [b, 4, 4*s, ...] rows, the softmax on a [b, 16, s, m] view. One
// relax.attention on the products' layout (k and v unrepeated), the view of its result kept.
// CHECK-LABEL: func.func @grouped
// CHECK-SAME: (%[[Q:.*]]: !relax.tensor<["b", "s", 16, 64], f32>, %[[K:.*]]: !relax.tensor<["b", "m", 4, 64], f32>, %[[V:.*]]: !relax.tensor<["b", "m", 4, 64], f32>)
// CHECK-NOT: "relax.matmul"
// CHECK: %[[QP:.*]] = "relax.permute_dims"(%[[Q]]) {axes = [0, 2, 1, 3]}
// CHECK: %[[QG:.*]] = "relax.reshape"(%[[QP]]) {shape = ["b", 4, "4*s", 64]}
// CHECK: %[[KP:.*]] = "relax.permute_dims"(%[[K]]) {axes = [0, 2, 1, 3]}
// CHECK: %[[VP:.*]] = "relax.permute_dims"(%[[V]]) {axes = [0, 2, 1, 3]}
// CHECK: %[[A:.*]] = "relax.attention"(%[[QG]], %[[KP]], %[[VP]]) {divisor = 8.000000e+00 : f32} : {{.*}} -> !relax.tensor<["b", 4, "4*s", 64], f32>
// CHECK: %[[R:.*]] = "relax.reshape"(%[[A]]) {shape = ["b", 16, "s", 64]}
// CHECK-NOT: "relax.exp"
// CHECK: return
// Versioned on the key length m.
// VERSION-LABEL: func.func @grouped
// VERSION: "relax.arange"() {dtype = i64, end = "m + 1", start = "m"}
// VERSION: "relax_v.if"
func.func @grouped(%arg0: !relax.tensor<["b", "s", 16, 64], f32>, %arg1: !relax.tensor<["b", "m", 4, 64], f32>, %arg2: !relax.tensor<["b", "m", 4, 64], f32>) -> !relax.tensor<["b", "s", 16, 64], f32> {
  %0 = "relax.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> !relax.tensor<[], f32>
  %1 = "relax.constant"() {value = dense<8.000000e+00> : tensor<f32>} : () -> !relax.tensor<[], f32>
  %2 = "relax.permute_dims"(%arg0) {axes = [0, 2, 1, 3]} : (!relax.tensor<["b", "s", 16, 64], f32>) -> !relax.tensor<["b", 16, "s", 64], f32>
  %3 = "relax.reshape"(%2) {shape = ["b", 4, "4*s", 64]} : (!relax.tensor<["b", 16, "s", 64], f32>) -> !relax.tensor<["b", 4, "4*s", 64], f32>
  %4 = "relax.permute_dims"(%arg1) {axes = [0, 2, 1, 3]} : (!relax.tensor<["b", "m", 4, 64], f32>) -> !relax.tensor<["b", 4, "m", 64], f32>
  %5 = "relax.permute_dims"(%4) {axes = [0, 1, 3, 2]} : (!relax.tensor<["b", 4, "m", 64], f32>) -> !relax.tensor<["b", 4, 64, "m"], f32>
  %6 = "relax.matmul"(%3, %5) : (!relax.tensor<["b", 4, "4*s", 64], f32>, !relax.tensor<["b", 4, 64, "m"], f32>) -> !relax.tensor<["b", 4, "4*s", "m"], f32>
  %7 = "relax.reshape"(%6) {shape = ["b", 16, "s", "m"]} : (!relax.tensor<["b", 4, "4*s", "m"], f32>) -> !relax.tensor<["b", 16, "s", "m"], f32>
  %8 = "relax.divide"(%7, %1) : (!relax.tensor<["b", 16, "s", "m"], f32>, !relax.tensor<[], f32>) -> !relax.tensor<["b", 16, "s", "m"], f32>
  %9 = "relax.max"(%8) {axes = [3], keepdims = false} : (!relax.tensor<["b", 16, "s", "m"], f32>) -> !relax.tensor<["b", 16, "s"], f32>
  %10 = "relax.maximum"(%0, %9) : (!relax.tensor<[], f32>, !relax.tensor<["b", 16, "s"], f32>) -> !relax.tensor<["b", 16, "s"], f32>
  %11 = "relax.reshape"(%10) {shape = ["b", 16, "s", 1]} : (!relax.tensor<["b", 16, "s"], f32>) -> !relax.tensor<["b", 16, "s", 1], f32>
  %12 = "relax.broadcast_to"(%11) {shape = ["b", 16, "s", "m"]} : (!relax.tensor<["b", 16, "s", 1], f32>) -> !relax.tensor<["b", 16, "s", "m"], f32>
  %13 = "relax.subtract"(%8, %12) : (!relax.tensor<["b", 16, "s", "m"], f32>, !relax.tensor<["b", 16, "s", "m"], f32>) -> !relax.tensor<["b", 16, "s", "m"], f32>
  %14 = "relax.exp"(%13) : (!relax.tensor<["b", 16, "s", "m"], f32>) -> !relax.tensor<["b", 16, "s", "m"], f32>
  %15 = "relax.sum"(%14) {axes = [3], keepdims = false} : (!relax.tensor<["b", 16, "s", "m"], f32>) -> !relax.tensor<["b", 16, "s"], f32>
  %16 = "relax.reshape"(%15) {shape = ["b", 16, "s", 1]} : (!relax.tensor<["b", 16, "s"], f32>) -> !relax.tensor<["b", 16, "s", 1], f32>
  %17 = "relax.broadcast_to"(%16) {shape = ["b", 16, "s", "m"]} : (!relax.tensor<["b", 16, "s", 1], f32>) -> !relax.tensor<["b", 16, "s", "m"], f32>
  %18 = "relax.divide"(%14, %17) : (!relax.tensor<["b", 16, "s", "m"], f32>, !relax.tensor<["b", 16, "s", "m"], f32>) -> !relax.tensor<["b", 16, "s", "m"], f32>
  %19 = "relax.permute_dims"(%arg2) {axes = [0, 2, 1, 3]} : (!relax.tensor<["b", "m", 4, 64], f32>) -> !relax.tensor<["b", 4, "m", 64], f32>
  %20 = "relax.reshape"(%18) {shape = ["b", 4, "4*s", "m"]} : (!relax.tensor<["b", 16, "s", "m"], f32>) -> !relax.tensor<["b", 4, "4*s", "m"], f32>
  %21 = "relax.matmul"(%20, %19) : (!relax.tensor<["b", 4, "4*s", "m"], f32>, !relax.tensor<["b", 4, "m", 64], f32>) -> !relax.tensor<["b", 4, "4*s", 64], f32>
  %22 = "relax.reshape"(%21) {shape = ["b", 16, "s", 64]} : (!relax.tensor<["b", 4, "4*s", 64], f32>) -> !relax.tensor<["b", 16, "s", 64], f32>
  %23 = "relax.permute_dims"(%22) {axes = [0, 2, 1, 3]} : (!relax.tensor<["b", 16, "s", 64], f32>) -> !relax.tensor<["b", "s", 16, 64], f32>
  return %23 : !relax.tensor<["b", "s", 16, 64], f32>
}
