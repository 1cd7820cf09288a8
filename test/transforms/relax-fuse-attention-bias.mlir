// RUN: relax-opt %s --split-input-file --relax-fuse-attention | FileCheck %s
// RUN: relax-opt %s --split-input-file '--relax-fuse-attention=min_keys=0 min_queries=0' | FileCheck %s --check-prefix=ALL
// RUN: relax-opt %s --split-input-file '--relax-fuse-attention=min_keys=0 min_queries=0' --relax-legalize | FileCheck %s --check-prefix=KERNEL
// RUN: relax-opt %s --split-input-file '--relax-fuse-attention=fuse_bias=0' | FileCheck %s --check-prefix=NOBIAS

// The attention chains transformers' Flax Llama (grouped-query: 4 query heads over 2 KV heads) and
// GPT-2 leave after relax-canonicalize, cut from the imported prefill and decode of the tiny models
// (head dim 32): the scores plus a [b, 1, Sq, Sk] bias (HF's padding-and-causal mask of 0 /
// finfo.min, built from data) broadcast over the heads. They fuse into relax.attention with the
// bias as its 4th operand, unbroadcast; Llama's in the products' layout with query_heads = 2 (the
// bias read in the heads' layout). By default the prefill is versioned (relax_v.if on s < 256 or
// 2*s < 32 rows); the decode step's 2 static rows per KV head stay unfused (below 32 rows).

// CHECK-LABEL: func.func private @llama_prefill_attention0_short
// CHECK-SAME: (%[[SQ:.*]]: !relax.tensor<["b", 2, "2*s", 32], f32>, %[[SK:.*]]: !relax.tensor<["b", 2, "s", 32], f32>, %[[SV:.*]]: !relax.tensor<["b", 2, "s", 32], f32>, %[[SB:.*]]: !relax.tensor<["b", 1, "s", "s"], f32>)
// CHECK: %[[S:.*]] = "relax.matmul"(%[[SQ]]
// CHECK: %[[BB:.*]] = "relax.broadcast_to"(%[[SB]]) {shape = ["b", 4, "s", "s"]}
// CHECK: %[[SV4:.*]] = "relax.reshape"(%[[S]]) {shape = ["b", 4, "s", "s"]}
// CHECK: %[[X:.*]] = "relax.add"(%[[SV4]], %[[BB]])
// CHECK: "relax.reshape"(%[[X]]) {shape = ["b", 2, "2*s", "s"]}
// CHECK: "relax.exp"
// CHECK-LABEL: func.func private @llama_prefill_attention0_fused
// CHECK-SAME: (%[[FQ:.*]]: !relax.tensor<["b", 2, "2*s", 32], f32>, %[[FK:.*]]: !relax.tensor<["b", 2, "s", 32], f32>, %[[FV:.*]]: !relax.tensor<["b", 2, "s", 32], f32>, %[[FB:.*]]: !relax.tensor<["b", 1, "s", "s"], f32>)
// CHECK-NEXT: %[[A:.*]] = "relax.attention"(%[[FQ]], %[[FK]], %[[FV]], %[[FB]]) {query_heads = 2 : i64} : {{.*}} -> !relax.tensor<["b", 2, "2*s", 32], f32>
// CHECK-NEXT: return %[[A]]
// fuse_bias=0 leaves a bias chain on symbolic lengths unfused.
// NOBIAS-NOT: relax_v.if
// NOBIAS-LABEL: func.func @llama_prefill
// NOBIAS-NOT: relax.attention
// NOBIAS: return
// CHECK-LABEL: func.func @llama_prefill
// CHECK-SAME: %[[BIAS:[^:]*]]: !relax.tensor<["b", 1, "s", "s"], f32>)
// CHECK-NOT: "relax.matmul"
// CHECK: "relax.arange"() {dtype = i64, end = "s + 1", start = "s"}
// CHECK: %[[C1:.*]] = "relax.less"
// CHECK: "relax.arange"() {dtype = i64, end = "2*s + 1", start = "2*s"}
// CHECK: %[[C2:.*]] = "relax.less"
// CHECK: %[[C:.*]] = "relax.logical_or"(%[[C1]], %[[C2]])
// CHECK: %[[R:.*]] = "relax_v.if"(%[[C]], %{{.*}}, %{{.*}}, %{{.*}}, %[[BIAS]]) {else_branch = @llama_prefill_attention0_fused, then_branch = @llama_prefill_attention0_short}
// CHECK-NOT: "relax.exp"
// CHECK-NOT: "relax.broadcast_to"
// CHECK: "relax.reshape"(%[[R]]) {shape = ["b", 4, "s", 32]}
// ALL-LABEL: func.func @llama_prefill
// ALL-SAME: %[[BIAS:[^:]*]]: !relax.tensor<["b", 1, "s", "s"], f32>)
// ALL: "relax.attention"(%{{.*}}, %{{.*}}, %{{.*}}, %[[BIAS]]) {query_heads = 2 : i64}
// ALL-NOT: "relax.exp"
// The kernel reads the bias into a [1, 32, 64] tile per key tile, four 16-lane vectors per query row
// (the row's head and its row within the head: divui / remui by the rows per head; key columns past
// the end read as 0), and adds it to the scores.
// KERNEL-LABEL: func.func @llama_prefill
// KERNEL: "relax_v.call_tir"(%{{.*}}, %{{.*}}, %{{.*}}, %[[BIAS:arg3]]) {callee = @[[F:attention]]}
// KERNEL: func.func private @[[F]](
// KERNEL: scf.forall
// KERNEL: vector.fma
// KERNEL: scf.for
// KERNEL: arith.divui
// KERNEL: arith.remui
// KERNEL: vector.transfer_read %{{[a-z0-9]*}}[%{{.*}}, %c0, %{{.*}}, %{{.*}}], %{{[a-z0-9_]*}} : tensor<?x1x?x?xf32>, vector<16xf32>
// KERNEL: vector.transfer_write %{{.*}} {in_bounds = [true]} : vector<16xf32>, tensor<1x32x64xf32>
// KERNEL: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<32x64xf32>, tensor<1x32x64xf32>)
// KERNEL: arith.addf
// KERNEL: arith.maximumf
// KERNEL: math.exp

func.func @llama_prefill(%q: !relax.tensor<["b", "s", 4, 32], f32>, %k: !relax.tensor<["b", "s", 2, 32], f32>, %v: !relax.tensor<["b", "s", 2, 32], f32>, %bias: !relax.tensor<["b", 1, "s", "s"], f32>) -> !relax.tensor<["b", "s", 4, 32], f32> {
  %ninf = "relax.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> !relax.tensor<[], f32>
  %123 = "relax.permute_dims"(%q) {axes = [0, 2, 1, 3]} : (!relax.tensor<["b", "s", 4, 32], f32>) -> !relax.tensor<["b", 4, "s", 32], f32>
  %124 = "relax.reshape"(%123) {shape = ["b", 2, "2*s", 32]} : (!relax.tensor<["b", 4, "s", 32], f32>) -> !relax.tensor<["b", 2, "2*s", 32], f32>
  %125 = "relax.permute_dims"(%k) {axes = [0, 2, 1, 3]} : (!relax.tensor<["b", "s", 2, 32], f32>) -> !relax.tensor<["b", 2, "s", 32], f32>
  %126 = "relax.permute_dims"(%125) {axes = [0, 1, 3, 2]} : (!relax.tensor<["b", 2, "s", 32], f32>) -> !relax.tensor<["b", 2, 32, "s"], f32>
  %127 = "relax.matmul"(%124, %126) : (!relax.tensor<["b", 2, "2*s", 32], f32>, !relax.tensor<["b", 2, 32, "s"], f32>) -> !relax.tensor<["b", 2, "2*s", "s"], f32>
  %128 = "relax.reshape"(%127) {shape = ["b", 4, "s", "s"]} : (!relax.tensor<["b", 2, "2*s", "s"], f32>) -> !relax.tensor<["b", 4, "s", "s"], f32>
  %129 = "relax.broadcast_to"(%bias) {shape = ["b", 4, "s", "s"]} : (!relax.tensor<["b", 1, "s", "s"], f32>) -> !relax.tensor<["b", 4, "s", "s"], f32>
  %130 = "relax.add"(%128, %129) : (!relax.tensor<["b", 4, "s", "s"], f32>, !relax.tensor<["b", 4, "s", "s"], f32>) -> !relax.tensor<["b", 4, "s", "s"], f32>
  %131 = "relax.max"(%130) {axes = [3], keepdims = false} : (!relax.tensor<["b", 4, "s", "s"], f32>) -> !relax.tensor<["b", 4, "s"], f32>
  %132 = "relax.maximum"(%ninf, %131) : (!relax.tensor<[], f32>, !relax.tensor<["b", 4, "s"], f32>) -> !relax.tensor<["b", 4, "s"], f32>
  %133 = "relax.reshape"(%132) {shape = ["b", 4, "s", 1]} : (!relax.tensor<["b", 4, "s"], f32>) -> !relax.tensor<["b", 4, "s", 1], f32>
  %134 = "relax.broadcast_to"(%133) {shape = ["b", 4, "s", "s"]} : (!relax.tensor<["b", 4, "s", 1], f32>) -> !relax.tensor<["b", 4, "s", "s"], f32>
  %135 = "relax.subtract"(%130, %134) : (!relax.tensor<["b", 4, "s", "s"], f32>, !relax.tensor<["b", 4, "s", "s"], f32>) -> !relax.tensor<["b", 4, "s", "s"], f32>
  %136 = "relax.exp"(%135) : (!relax.tensor<["b", 4, "s", "s"], f32>) -> !relax.tensor<["b", 4, "s", "s"], f32>
  %137 = "relax.sum"(%136) {axes = [3], keepdims = false} : (!relax.tensor<["b", 4, "s", "s"], f32>) -> !relax.tensor<["b", 4, "s"], f32>
  %138 = "relax.reshape"(%137) {shape = ["b", 4, "s", 1]} : (!relax.tensor<["b", 4, "s"], f32>) -> !relax.tensor<["b", 4, "s", 1], f32>
  %139 = "relax.broadcast_to"(%138) {shape = ["b", 4, "s", "s"]} : (!relax.tensor<["b", 4, "s", 1], f32>) -> !relax.tensor<["b", 4, "s", "s"], f32>
  %140 = "relax.divide"(%136, %139) : (!relax.tensor<["b", 4, "s", "s"], f32>, !relax.tensor<["b", 4, "s", "s"], f32>) -> !relax.tensor<["b", 4, "s", "s"], f32>
  %141 = "relax.permute_dims"(%v) {axes = [0, 2, 1, 3]} : (!relax.tensor<["b", "s", 2, 32], f32>) -> !relax.tensor<["b", 2, "s", 32], f32>
  %142 = "relax.reshape"(%140) {shape = ["b", 2, "2*s", "s"]} : (!relax.tensor<["b", 4, "s", "s"], f32>) -> !relax.tensor<["b", 2, "2*s", "s"], f32>
  %143 = "relax.matmul"(%142, %141) : (!relax.tensor<["b", 2, "2*s", "s"], f32>, !relax.tensor<["b", 2, "s", 32], f32>) -> !relax.tensor<["b", 2, "2*s", 32], f32>
  %144 = "relax.reshape"(%143) {shape = ["b", 4, "s", 32]} : (!relax.tensor<["b", 2, "2*s", 32], f32>) -> !relax.tensor<["b", 4, "s", 32], f32>
  %145 = "relax.permute_dims"(%144) {axes = [0, 2, 1, 3]} : (!relax.tensor<["b", 4, "s", 32], f32>) -> !relax.tensor<["b", "s", 4, 32], f32>
  return %145 : !relax.tensor<["b", "s", 4, 32], f32>
}

// -----

// GPT-2: no grouped query heads; the same bias operand, no query_heads.
// CHECK-LABEL: func.func private @gpt2_prefill_attention0_fused
// CHECK-SAME: %[[FB:[^:]*]]: !relax.tensor<["b", 1, "s", "s"], f32>)
// CHECK-NEXT: %[[A:.*]] = "relax.attention"(%{{.*}}, %{{.*}}, %{{.*}}, %[[FB]]) : {{.*}} -> !relax.tensor<["b", 4, "s", 32], f32>
// CHECK-LABEL: func.func @gpt2_prefill
// CHECK-SAME: %[[BIAS:[^:]*]]: !relax.tensor<["b", 1, "s", "s"], f32>)
// CHECK: %[[C:.*]] = "relax.less"
// CHECK: "relax_v.if"(%[[C]], %{{.*}}, %{{.*}}, %{{.*}}, %[[BIAS]]) {else_branch = @gpt2_prefill_attention0_fused
// ALL-LABEL: func.func @gpt2_prefill
// ALL: "relax.attention"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!relax.tensor<["b", 4, "s", 32], f32>, !relax.tensor<["b", 4, "s", 32], f32>, !relax.tensor<["b", 4, "s", 32], f32>, !relax.tensor<["b", 1, "s", "s"], f32>)
// ALL-NOT: "relax.exp"

func.func @gpt2_prefill(%q: !relax.tensor<["b", "s", 4, 32], f32>, %k: !relax.tensor<["b", "s", 4, 32], f32>, %v: !relax.tensor<["b", "s", 4, 32], f32>, %bias: !relax.tensor<["b", 1, "s", "s"], f32>) -> !relax.tensor<["b", "s", 4, 32], f32> {
  %ninf = "relax.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> !relax.tensor<[], f32>
  %133 = "relax.permute_dims"(%q) {axes = [0, 2, 1, 3]} : (!relax.tensor<["b", "s", 4, 32], f32>) -> !relax.tensor<["b", 4, "s", 32], f32>
  %134 = "relax.permute_dims"(%k) {axes = [0, 2, 1, 3]} : (!relax.tensor<["b", "s", 4, 32], f32>) -> !relax.tensor<["b", 4, "s", 32], f32>
  %135 = "relax.permute_dims"(%134) {axes = [0, 1, 3, 2]} : (!relax.tensor<["b", 4, "s", 32], f32>) -> !relax.tensor<["b", 4, 32, "s"], f32>
  %136 = "relax.matmul"(%133, %135) : (!relax.tensor<["b", 4, "s", 32], f32>, !relax.tensor<["b", 4, 32, "s"], f32>) -> !relax.tensor<["b", 4, "s", "s"], f32>
  %137 = "relax.broadcast_to"(%bias) {shape = ["b", 4, "s", "s"]} : (!relax.tensor<["b", 1, "s", "s"], f32>) -> !relax.tensor<["b", 4, "s", "s"], f32>
  %138 = "relax.add"(%136, %137) : (!relax.tensor<["b", 4, "s", "s"], f32>, !relax.tensor<["b", 4, "s", "s"], f32>) -> !relax.tensor<["b", 4, "s", "s"], f32>
  %139 = "relax.max"(%138) {axes = [3], keepdims = false} : (!relax.tensor<["b", 4, "s", "s"], f32>) -> !relax.tensor<["b", 4, "s"], f32>
  %140 = "relax.maximum"(%ninf, %139) : (!relax.tensor<[], f32>, !relax.tensor<["b", 4, "s"], f32>) -> !relax.tensor<["b", 4, "s"], f32>
  %141 = "relax.reshape"(%140) {shape = ["b", 4, "s", 1]} : (!relax.tensor<["b", 4, "s"], f32>) -> !relax.tensor<["b", 4, "s", 1], f32>
  %142 = "relax.broadcast_to"(%141) {shape = ["b", 4, "s", "s"]} : (!relax.tensor<["b", 4, "s", 1], f32>) -> !relax.tensor<["b", 4, "s", "s"], f32>
  %143 = "relax.subtract"(%138, %142) : (!relax.tensor<["b", 4, "s", "s"], f32>, !relax.tensor<["b", 4, "s", "s"], f32>) -> !relax.tensor<["b", 4, "s", "s"], f32>
  %144 = "relax.exp"(%143) : (!relax.tensor<["b", 4, "s", "s"], f32>) -> !relax.tensor<["b", 4, "s", "s"], f32>
  %145 = "relax.sum"(%144) {axes = [3], keepdims = false} : (!relax.tensor<["b", 4, "s", "s"], f32>) -> !relax.tensor<["b", 4, "s"], f32>
  %146 = "relax.reshape"(%145) {shape = ["b", 4, "s", 1]} : (!relax.tensor<["b", 4, "s"], f32>) -> !relax.tensor<["b", 4, "s", 1], f32>
  %147 = "relax.broadcast_to"(%146) {shape = ["b", 4, "s", "s"]} : (!relax.tensor<["b", 4, "s", 1], f32>) -> !relax.tensor<["b", 4, "s", "s"], f32>
  %148 = "relax.divide"(%144, %147) : (!relax.tensor<["b", 4, "s", "s"], f32>, !relax.tensor<["b", 4, "s", "s"], f32>) -> !relax.tensor<["b", 4, "s", "s"], f32>
  %149 = "relax.permute_dims"(%v) {axes = [0, 2, 1, 3]} : (!relax.tensor<["b", "s", 4, 32], f32>) -> !relax.tensor<["b", 4, "s", 32], f32>
  %150 = "relax.matmul"(%148, %149) : (!relax.tensor<["b", 4, "s", "s"], f32>, !relax.tensor<["b", 4, "s", 32], f32>) -> !relax.tensor<["b", 4, "s", 32], f32>
  %151 = "relax.permute_dims"(%150) {axes = [0, 2, 1, 3]} : (!relax.tensor<["b", 4, "s", 32], f32>) -> !relax.tensor<["b", "s", 4, 32], f32>
  return %151 : !relax.tensor<["b", "s", 4, 32], f32>
}

// -----

// Llama's decode step: one query per sequence, 2 rows per KV head (static, below 32): unfused by
// default; fused only when asked for every length, the bias [b, 1, 1, m] broadcast over heads and rows.
// CHECK-LABEL: func.func @llama_decode
// CHECK-NOT: "relax.attention"
// CHECK-NOT: "relax_v.if"
// CHECK: "relax.exp"
// ALL-LABEL: func.func @llama_decode
// ALL-SAME: %[[BIAS:[^:]*]]: !relax.tensor<["b", 1, 1, "m"], f32>)
// ALL: "relax.attention"(%{{.*}}, %{{.*}}, %{{.*}}, %[[BIAS]]) {query_heads = 2 : i64} : {{.*}} -> !relax.tensor<["b", 2, 2, 32], f32>
// ALL-NOT: "relax.exp"

func.func @llama_decode(%q: !relax.tensor<["b", 1, 4, 32], f32>, %k: !relax.tensor<["b", "m", 2, 32], f32>, %v: !relax.tensor<["b", "m", 2, 32], f32>, %bias: !relax.tensor<["b", 1, 1, "m"], f32>) -> !relax.tensor<["b", 1, 4, 32], f32> {
  %ninf = "relax.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> !relax.tensor<[], f32>
  %137 = "relax.permute_dims"(%q) {axes = [0, 2, 1, 3]} : (!relax.tensor<["b", 1, 4, 32], f32>) -> !relax.tensor<["b", 4, 1, 32], f32>
  %138 = "relax.reshape"(%137) {shape = ["b", 2, 2, 32]} : (!relax.tensor<["b", 4, 1, 32], f32>) -> !relax.tensor<["b", 2, 2, 32], f32>
  %139 = "relax.permute_dims"(%k) {axes = [0, 2, 1, 3]} : (!relax.tensor<["b", "m", 2, 32], f32>) -> !relax.tensor<["b", 2, "m", 32], f32>
  %140 = "relax.permute_dims"(%139) {axes = [0, 1, 3, 2]} : (!relax.tensor<["b", 2, "m", 32], f32>) -> !relax.tensor<["b", 2, 32, "m"], f32>
  %141 = "relax.matmul"(%138, %140) : (!relax.tensor<["b", 2, 2, 32], f32>, !relax.tensor<["b", 2, 32, "m"], f32>) -> !relax.tensor<["b", 2, 2, "m"], f32>
  %142 = "relax.reshape"(%141) {shape = ["b", 4, 1, "m"]} : (!relax.tensor<["b", 2, 2, "m"], f32>) -> !relax.tensor<["b", 4, 1, "m"], f32>
  %143 = "relax.broadcast_to"(%bias) {shape = ["b", 4, 1, "m"]} : (!relax.tensor<["b", 1, 1, "m"], f32>) -> !relax.tensor<["b", 4, 1, "m"], f32>
  %144 = "relax.add"(%142, %143) : (!relax.tensor<["b", 4, 1, "m"], f32>, !relax.tensor<["b", 4, 1, "m"], f32>) -> !relax.tensor<["b", 4, 1, "m"], f32>
  %145 = "relax.max"(%144) {axes = [3], keepdims = false} : (!relax.tensor<["b", 4, 1, "m"], f32>) -> !relax.tensor<["b", 4, 1], f32>
  %146 = "relax.maximum"(%ninf, %145) : (!relax.tensor<[], f32>, !relax.tensor<["b", 4, 1], f32>) -> !relax.tensor<["b", 4, 1], f32>
  %147 = "relax.reshape"(%146) {shape = ["b", 4, 1, 1]} : (!relax.tensor<["b", 4, 1], f32>) -> !relax.tensor<["b", 4, 1, 1], f32>
  %148 = "relax.broadcast_to"(%147) {shape = ["b", 4, 1, "m"]} : (!relax.tensor<["b", 4, 1, 1], f32>) -> !relax.tensor<["b", 4, 1, "m"], f32>
  %149 = "relax.subtract"(%144, %148) : (!relax.tensor<["b", 4, 1, "m"], f32>, !relax.tensor<["b", 4, 1, "m"], f32>) -> !relax.tensor<["b", 4, 1, "m"], f32>
  %150 = "relax.exp"(%149) : (!relax.tensor<["b", 4, 1, "m"], f32>) -> !relax.tensor<["b", 4, 1, "m"], f32>
  %151 = "relax.sum"(%150) {axes = [3], keepdims = false} : (!relax.tensor<["b", 4, 1, "m"], f32>) -> !relax.tensor<["b", 4, 1], f32>
  %152 = "relax.reshape"(%151) {shape = ["b", 4, 1, 1]} : (!relax.tensor<["b", 4, 1], f32>) -> !relax.tensor<["b", 4, 1, 1], f32>
  %153 = "relax.broadcast_to"(%152) {shape = ["b", 4, 1, "m"]} : (!relax.tensor<["b", 4, 1, 1], f32>) -> !relax.tensor<["b", 4, 1, "m"], f32>
  %154 = "relax.divide"(%150, %153) : (!relax.tensor<["b", 4, 1, "m"], f32>, !relax.tensor<["b", 4, 1, "m"], f32>) -> !relax.tensor<["b", 4, 1, "m"], f32>
  %155 = "relax.permute_dims"(%v) {axes = [0, 2, 1, 3]} : (!relax.tensor<["b", "m", 2, 32], f32>) -> !relax.tensor<["b", 2, "m", 32], f32>
  %156 = "relax.reshape"(%154) {shape = ["b", 2, 2, "m"]} : (!relax.tensor<["b", 4, 1, "m"], f32>) -> !relax.tensor<["b", 2, 2, "m"], f32>
  %157 = "relax.matmul"(%156, %155) : (!relax.tensor<["b", 2, 2, "m"], f32>, !relax.tensor<["b", 2, "m", 32], f32>) -> !relax.tensor<["b", 2, 2, 32], f32>
  %158 = "relax.reshape"(%157) {shape = ["b", 4, 1, 32]} : (!relax.tensor<["b", 2, 2, 32], f32>) -> !relax.tensor<["b", 4, 1, 32], f32>
  %159 = "relax.permute_dims"(%158) {axes = [0, 2, 1, 3]} : (!relax.tensor<["b", 4, 1, 32], f32>) -> !relax.tensor<["b", 1, 4, 32], f32>
  return %159 : !relax.tensor<["b", 1, 4, 32], f32>
}
