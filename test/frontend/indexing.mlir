// RUN: relax-import-stablehlo %s | FileCheck %s
// RUN: relax-import-stablehlo %s | relax-opt --relax-infer-shapes | FileCheck %s --check-prefix=INFER
// RUN: relax-import-stablehlo %s | relax-opt --relax-infer-shapes --relax-legalize | FileCheck %s --check-prefix=LEG

// The indexing family (issue 16): general gather (here take_along_axis: batching dims), scatter
// with an add update computation, jax's argmax (a variadic reduce of values and an iota), and a
// two-operand sort (argsort) with jax's canonicalizing total-order comparator.

// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: !relax.tensor<["n", 5], f32>, %[[I:.*]]: !relax.tensor<["n", 2, 1], i32>, %[[SI:.*]]: !relax.tensor<[3, 1], i32>, %[[U:.*]]: !relax.tensor<[3, 5], f32>)
// CHECK: %[[G:.*]] = "relax.gather"(%[[X]], %[[I]]) {collapsed_slice_dims = [1], index_vector_dim = 2 : i64, offset_dims = [], operand_batching_dims = [0], slice_sizes = [1, 1], start_index_map = [1], start_indices_batching_dims = [0]}
// CHECK: %[[S:.*]] = "relax_v.scatter"(%[[X]], %[[SI]], %[[U]]) {combiner = "add", index_vector_dim = 1 : i64, input_batching_dims = [], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], scatter_indices_batching_dims = [], update_window_dims = [1]}
// CHECK: %[[AM:.*]] = "relax.argmax"(%[[X]]) {axis = 1 : i64, dtype = i32}
// CHECK: %[[SO:.*]]:2 = "relax_v.sort"(%[[X]], %{{.*}}) {axis = 1 : i64, descending = [0], num_keys = 1 : i64, total_order = [0]}
// CHECK: return %[[G]], %[[S]], %[[AM]], %[[SO]]#1

// INFER: "relax.gather"{{.*}} -> !relax.tensor<["n", 2], f32>
// INFER: "relax_v.scatter"{{.*}} -> !relax.tensor<["n", 5], f32>
// INFER: "relax.argmax"{{.*}} -> !relax.tensor<["n"], i32>
// INFER: "relax_v.sort"{{.*}} -> (!relax.tensor<["n", 5], f32>, !relax.tensor<["n", 5], i32>)

// The gather kernel reads the index vector and the operand with tensor.extract, clamping the start
// into [0, dim - slice_size].
// LEG-LABEL: func.func private @gather
// LEG-SAME: (%[[GX:.*]]: tensor<?x5xf32>, %[[GI:.*]]: tensor<?x2x1xi32>, %[[GO:.*]]: tensor<?x2xf32>)
// LEG: linalg.generic {{.*}} outs(%[[GO]] : tensor<?x2xf32>)
// LEG: %[[E:.*]] = tensor.extract %[[GI]][{{.*}}] : tensor<?x2x1xi32>
// LEG: %[[C:.*]] = arith.index_cast %[[E]] : i32 to index
// LEG: arith.cmpi slt, %[[C]]
// LEG: tensor.extract %[[GX]][{{.*}}] : tensor<?x5xf32>
// The scatter kernel: the input itself when the in-place flag (symbolic arg 0, set by
// relax-plan-memory) is 1, else a copy of it; then one loop per updates dim, a bounds check, add.
// LEG-LABEL: func.func private @scatter
// LEG-SAME: (%[[SX:.*]]: tensor<?x5xf32>, %{{.*}}: tensor<3x1xi32>, %[[SU:.*]]: tensor<3x5xf32>, %[[SO:.*]]: tensor<?x5xf32>, %[[SF:.*]]: index)
// LEG: %[[INPL:.*]] = arith.cmpi ne, %[[SF]]
// LEG: %[[INIT:.*]] = scf.if %[[INPL]] -> (tensor<?x5xf32>) {
// LEG-NEXT: scf.yield %[[SX]] : tensor<?x5xf32>
// LEG-NEXT: } else {
// LEG-NEXT: %[[CP:.*]] = linalg.copy ins(%[[SX]] : tensor<?x5xf32>) outs(%[[SO]] : tensor<?x5xf32>)
// LEG-NEXT: scf.yield %[[CP]]
// LEG: scf.for {{.*}} iter_args(%[[A0:.*]] = %[[INIT]])
// LEG: scf.for %[[J:.*]] = {{.*}} iter_args(%[[A1:.*]] = %[[A0]])
// LEG: scf.if
// LEG: %[[OLD:.*]] = tensor.extract %[[A1]]
// LEG: %[[UP:.*]] = tensor.extract %[[SU]]
// LEG: %[[NEW:.*]] = arith.addf %[[OLD]], %[[UP]] : f32
// LEG: tensor.insert %[[NEW]] into %[[A1]]
// The argmax kernel: one reduction carrying (value, index), NaN-aware.
// LEG-LABEL: func.func private @argmax
// LEG: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// LEG: arith.cmpf uno
// The sort kernel: stable ranks (a reduction over a second position), then a select per position.
// LEG-LABEL: func.func private @sort
// LEG: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// LEG: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]

module @jit_f attributes {jax.uses_shape_polymorphism = true} {
  func.func public @main(%arg0: tensor<?x5xf32>, %arg1: tensor<?x2x1xi32>, %arg2: tensor<3x1xi32>, %arg3: tensor<3x5xf32>) -> (tensor<?x2xf32>, tensor<?x5xf32>, tensor<?xi32>, tensor<?x5xi32>) {
    %n = stablehlo.get_dimension_size %arg0, dim = 0 : (tensor<?x5xf32>) -> tensor<i32>
    %m = stablehlo.get_dimension_size %arg1, dim = 0 : (tensor<?x2x1xi32>) -> tensor<i32>
    %same = stablehlo.compare EQ, %m, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.custom_call @shape_assertion(%same, %m, %n) {api_version = 2 : i32, error_message = "shape assertion", has_side_effect = true} : (tensor<i1>, tensor<i32>, tensor<i32>) -> ()
    %0 = call @_wrapped(%n, %arg0, %arg1, %arg2, %arg3) : (tensor<i32>, tensor<?x5xf32>, tensor<?x2x1xi32>, tensor<3x1xi32>, tensor<3x5xf32>) -> tensor<?x2xf32>
    %1 = "stablehlo.scatter"(%arg0, %arg2, %arg3) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<?x5xf32>, tensor<3x1xi32>, tensor<3x5xf32>) -> tensor<?x5xf32>
    %c5 = stablehlo.constant dense<5> : tensor<1xi32>
    %nr = stablehlo.reshape %n : (tensor<i32>) -> tensor<1xi32>
    %shape = stablehlo.concatenate %nr, %c5, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %iota = stablehlo.dynamic_iota %shape, dim = 1 : (tensor<2xi32>) -> tensor<?x5xi32>
    %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %2:2 = stablehlo.reduce(%arg0 init: %ninf), (%iota init: %zero) across dimensions = [1] : (tensor<?x5xf32>, tensor<?x5xi32>, tensor<f32>, tensor<i32>) -> (tensor<?xf32>, tensor<?xi32>)
     reducer(%a: tensor<f32>, %c: tensor<f32>) (%ai: tensor<i32>, %ci: tensor<i32>) {
      %g = stablehlo.compare GT, %a, %c, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %nan = stablehlo.compare NE, %a, %a, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %o = stablehlo.or %g, %nan : tensor<i1>
      %e = stablehlo.compare EQ, %a, %c, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %l = stablehlo.compare LT, %ai, %ci, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %al = stablehlo.and %e, %l : tensor<i1>
      %o2 = stablehlo.or %o, %al : tensor<i1>
      %v = stablehlo.select %o, %a, %c : tensor<i1>, tensor<f32>
      %vi = stablehlo.select %o2, %ai, %ci : tensor<i1>, tensor<i32>
      stablehlo.return %v, %vi : tensor<f32>, tensor<i32>
    }
    %cnan = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %cz = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %3:2 = "stablehlo.sort"(%arg0, %iota) <{dimension = 1 : i64, is_stable = true}> ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>, %pi: tensor<i32>, %qi: tensor<i32>):
      %4 = stablehlo.compare EQ, %p, %cz, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %5 = stablehlo.select %4, %cz, %p : tensor<i1>, tensor<f32>
      %6 = stablehlo.compare NE, %p, %p, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %7 = stablehlo.select %6, %cnan, %5 : tensor<i1>, tensor<f32>
      %8 = stablehlo.compare EQ, %q, %cz, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %9 = stablehlo.select %8, %cz, %q : tensor<i1>, tensor<f32>
      %10 = stablehlo.compare NE, %q, %q, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %11 = stablehlo.select %10, %cnan, %9 : tensor<i1>, tensor<f32>
      %12 = stablehlo.compare LT, %7, %11, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %12 : tensor<i1>
    }) : (tensor<?x5xf32>, tensor<?x5xi32>) -> (tensor<?x5xf32>, tensor<?x5xi32>)
    return %0, %1, %2#1, %3#1 : tensor<?x2xf32>, tensor<?x5xf32>, tensor<?xi32>, tensor<?x5xi32>
  }
  func.func private @_wrapped(%arg0: tensor<i32> {jax.global_constant = "n"}, %arg1: tensor<?x5xf32>, %arg2: tensor<?x2x1xi32>, %arg3: tensor<3x1xi32>, %arg4: tensor<3x5xf32>) -> tensor<?x2xf32> {
    %0 = "stablehlo.gather"(%arg1, %arg2) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 2>, slice_sizes = array<i64: 1, 1>}> : (tensor<?x5xf32>, tensor<?x2x1xi32>) -> tensor<?x2xf32>
    return %0 : tensor<?x2xf32>
  }
}
