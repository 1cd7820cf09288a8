// RUN: relax-opt %s --split-input-file --relax-infer-shapes | FileCheck %s
// Collectives of a per-device program: symbolic shapes through gather, scatter and all-to-all.

// CHECK-LABEL: func.func @collectives
func.func @collectives(%x: !relax.tensor<["k", 4], f32>, %y: !relax.tensor<["2*k", 6], f32>) {
  // CHECK: "relax.all_reduce"{{.*}} -> !relax.tensor<["k", 4], f32>
  %0 = "relax.all_reduce"(%x) {groups = [0, 1], group_size = 2, reduce = "sum"} : (!relax.tensor<["k", 4], f32>) -> !relax.tensor<["?", "?"], f32>
  // CHECK: "relax.all_gather"{{.*}} -> !relax.tensor<["2*k", 4], f32>
  %1 = "relax.all_gather"(%x) {groups = [0, 1], group_size = 2, dim = 0} : (!relax.tensor<["k", 4], f32>) -> !relax.tensor<["?", "?"], f32>
  // CHECK: "relax.reduce_scatter"{{.*}} -> !relax.tensor<["k", 6], f32>
  %2 = "relax.reduce_scatter"(%y) {groups = [0, 1], group_size = 2, dim = 0, reduce = "max"} : (!relax.tensor<["2*k", 6], f32>) -> !relax.tensor<["?", "?"], f32>
  // CHECK: "relax.all_to_all"{{.*}} -> !relax.tensor<["k", 12], f32>
  %3 = "relax.all_to_all"(%y) {groups = [0, 1], group_size = 2, split_dim = 0, concat_dim = 1} : (!relax.tensor<["2*k", 6], f32>) -> !relax.tensor<["?", "?"], f32>
  // CHECK: "relax.collective_permute"{{.*}} -> !relax.tensor<["k", 4], f32>
  %4 = "relax.collective_permute"(%x) {groups = [0, 1], group_size = 2, pairs = [0, 1, 1, 0]} : (!relax.tensor<["k", 4], f32>) -> !relax.tensor<["?", "?"], f32>
  // CHECK: "relax.all_gather"{{.*}} -> !relax.tensor<["k", 16], f32>
  %5 = "relax.all_gather"(%x) {groups = [0, 1, 2, 3], group_size = 4, dim = 1} : (!relax.tensor<["k", 4], f32>) -> !relax.tensor<["?", "?"], f32>
  return
}
