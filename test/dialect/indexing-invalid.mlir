// RUN: relax-opt %s --split-input-file --verify-diagnostics
// The indexing ops (issue 16) refuse ill-formed dimension numbers and shapes they cannot prove,
// as located diagnostics.

func.func @gather_slice_too_big(%x: !relax.tensor<["n", 4], f32>, %i: !relax.tensor<[3, 1], i32>) {
  // expected-error @+1 {{'relax.gather' op slice size 5 exceeds the operand's dim 1 (4)}}
  %0 = "relax.gather"(%x, %i) {offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1, slice_sizes = [1, 5]} : (!relax.tensor<["n", 4], f32>, !relax.tensor<[3, 1], i32>) -> !relax.tensor<["?", "?"], f32>
  return
}

// -----

func.func @gather_index_vector_size(%x: !relax.tensor<["n", 4], f32>, %i: !relax.tensor<[3, 2], i32>) {
  // expected-error @+1 {{'relax.gather' op the index vector (dim 1 of the indices, size 2) must have 1 elements}}
  %0 = "relax.gather"(%x, %i) {offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1, slice_sizes = [1, 4]} : (!relax.tensor<["n", 4], f32>, !relax.tensor<[3, 2], i32>) -> !relax.tensor<["?", "?"], f32>
  return
}

// -----

func.func @gather_float_indices(%x: !relax.tensor<["n", 4], f32>, %i: !relax.tensor<[3, 1], f32>) {
  // expected-error @+1 {{'relax.gather' op indices must have an integer element type, got f32}}
  %0 = "relax.gather"(%x, %i) {offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1, slice_sizes = [1, 4]} : (!relax.tensor<["n", 4], f32>, !relax.tensor<[3, 1], f32>) -> !relax.tensor<["?", "?"], f32>
  return
}

// -----

func.func @gather_batching_unproven(%x: !relax.tensor<["n", 4], f32>, %i: !relax.tensor<["m", 1], i32>) {
  // expected-error @+1 {{'relax.gather' op operand batching dim 0 (n) and indices batching dim 0 (m) are not provably equal}}
  %0 = "relax.gather"(%x, %i) {collapsed_slice_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 1, slice_sizes = [1, 1]} : (!relax.tensor<["n", 4], f32>, !relax.tensor<["m", 1], i32>) -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @scatter_bad_combiner(%x: !relax.tensor<["n", 4], f32>, %i: !relax.tensor<[3, 1], i32>, %u: !relax.tensor<[3, 4], f32>) {
  // expected-error @+1 {{'relax_v.scatter' op combiner must be one of replace, add, mul, max, min, got 'sub'}}
  %0 = "relax_v.scatter"(%x, %i, %u) {update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1, combiner = "sub"} : (!relax.tensor<["n", 4], f32>, !relax.tensor<[3, 1], i32>, !relax.tensor<[3, 4], f32>) -> !relax.tensor<["?", "?"], f32>
  return
}

// -----

func.func @scatter_updates_unproven(%x: !relax.tensor<["n", 4], f32>, %i: !relax.tensor<["k", 1], i32>, %u: !relax.tensor<[3, 4], f32>) {
  // expected-error @+1 {{'relax_v.scatter' op updates dim 0 (3) is not provably equal to the indices' batch dim (k)}}
  %0 = "relax_v.scatter"(%x, %i, %u) {update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1, combiner = "add"} : (!relax.tensor<["n", 4], f32>, !relax.tensor<["k", 1], i32>, !relax.tensor<[3, 4], f32>) -> !relax.tensor<["?", "?"], f32>
  return
}

// -----

func.func @argmax_float_index(%x: !relax.tensor<["n", 4], f32>) {
  // expected-error @+1 {{'relax.argmax' op the index type must be an integer type, got f32}}
  %0 = "relax.argmax"(%x) {axis = 1, dtype = f32} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["?"], f32>
  return
}

// -----

func.func @sort_shapes_differ(%x: !relax.tensor<["n", 4], f32>, %y: !relax.tensor<["m", 4], i32>) {
  // expected-error @+1 {{'relax_v.sort' op operand #1 dim 0 (m) is not provably equal to operand #0's (n)}}
  %0:2 = "relax_v.sort"(%x, %y) {axis = 1} : (!relax.tensor<["n", 4], f32>, !relax.tensor<["m", 4], i32>) -> (!relax.tensor<["?", 4], f32>, !relax.tensor<["?", 4], i32>)
  return
}

// -----

func.func @sort_num_keys(%x: !relax.tensor<["n", 4], f32>) {
  // expected-error @+1 {{'relax_v.sort' op num_keys must be in [1, 1], got 2}}
  %0 = "relax_v.sort"(%x) {axis = 0, num_keys = 2} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["?", 4], f32>
  return
}
