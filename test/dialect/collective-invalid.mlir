// RUN: relax-opt %s --split-input-file --relax-infer-shapes --verify-diagnostics
// Collectives whose shapes or groups are wrong are located errors.

func.func @scatter_indivisible(%x: !relax.tensor<["b", 4], f32>) {
  // expected-error @+1 {{not provably divisible by the group size 2}}
  %0 = "relax.reduce_scatter"(%x) {groups = [0, 1], group_size = 2, dim = 0, reduce = "sum"} : (!relax.tensor<["b", 4], f32>) -> !relax.tensor<["?", "?"], f32>
  return
}

// -----

func.func @scatter_static_indivisible(%x: !relax.tensor<[3, 4], f32>) {
  // expected-error @+1 {{not provably divisible by the group size 2}}
  %0 = "relax.all_to_all"(%x) {groups = [0, 1], group_size = 2, split_dim = 0, concat_dim = 1} : (!relax.tensor<[3, 4], f32>) -> !relax.tensor<["?", "?"], f32>
  return
}

// -----

func.func @groups_ragged(%x: !relax.tensor<[4], f32>) {
  // expected-error @+1 {{'groups' must list the ranks of groups of 2}}
  %0 = "relax.all_reduce"(%x) {groups = [0, 1, 2], group_size = 2, reduce = "sum"} : (!relax.tensor<[4], f32>) -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @bad_reduction(%x: !relax.tensor<[4], f32>) {
  // expected-error @+1 {{unknown reduction 'mean'}}
  %0 = "relax.all_reduce"(%x) {groups = [0, 1], group_size = 2, reduce = "mean"} : (!relax.tensor<[4], f32>) -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @and_on_floats(%x: !relax.tensor<[4], f32>) {
  // expected-error @+1 {{reduction 'and' needs i1 operands, got f32}}
  %0 = "relax.all_reduce"(%x) {groups = [0, 1], group_size = 2, reduce = "and"} : (!relax.tensor<[4], f32>) -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @permute_twice(%x: !relax.tensor<[4], f32>) {
  // expected-error @+1 {{'pairs' sends from or to a rank twice}}
  %0 = "relax.collective_permute"(%x) {groups = [0, 1], group_size = 2, pairs = [0, 1, 0, 0]} : (!relax.tensor<[4], f32>) -> !relax.tensor<["?"], f32>
  return
}
