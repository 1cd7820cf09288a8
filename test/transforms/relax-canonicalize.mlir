// RUN: relax-opt %s --split-input-file --relax-canonicalize | FileCheck %s

// A reshape chain becomes one reshape of the argument; the inner one is dead and removed.
// CHECK-LABEL: func.func @reshape_of_reshape
// CHECK-SAME:  (%[[X:.*]]: !relax.tensor<["b", "s", 64], f32>)
// CHECK:       %[[R:.*]] = "relax.reshape"(%[[X]]) {shape = ["b", 64, "s"]} : (!relax.tensor<["b", "s", 64], f32>) -> !relax.tensor<["b", 64, "s"], f32>
// CHECK-NOT:   "relax.reshape"
// CHECK:       return %[[R]]
func.func @reshape_of_reshape(%x: !relax.tensor<["b", "s", 64], f32>) -> !relax.tensor<["b", 64, "s"], f32> {
  %0 = "relax.reshape"(%x) {shape = ["b*s", 64]} : (!relax.tensor<["b", "s", 64], f32>) -> !relax.tensor<["b*s", 64], f32>
  %1 = "relax.reshape"(%0) {shape = ["b", 64, "s"]} : (!relax.tensor<["b*s", 64], f32>) -> !relax.tensor<["b", 64, "s"], f32>
  return %1 : !relax.tensor<["b", 64, "s"], f32>
}

// -----

// reshape(reshape(x)) back to x's own type folds to x.
// CHECK-LABEL: func.func @reshape_round_trip
// CHECK-SAME:  (%[[X:.*]]: !relax.tensor<["n", 4], f32>)
// CHECK-NOT:   "relax.reshape"
// CHECK:       return %[[X]]
func.func @reshape_round_trip(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %0 = "relax.reshape"(%x) {shape = ["4*n"]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["4*n"], f32>
  %1 = "relax.reshape"(%0) {shape = ["n", 4]} : (!relax.tensor<["4*n"], f32>) -> !relax.tensor<["n", 4], f32>
  return %1 : !relax.tensor<["n", 4], f32>
}

// -----

// An inner reshape that has another use stays; the outer one reads x directly.
// CHECK-LABEL: func.func @reshape_shared
// CHECK-SAME:  (%[[X:.*]]: !relax.tensor<["n", 4], f32>)
// CHECK:       %[[A:.*]] = "relax.reshape"(%[[X]]) {shape = ["4*n"]}
// CHECK:       %[[B:.*]] = "relax.reshape"(%[[X]]) {shape = [2, "2*n"]}
// CHECK:       %[[E:.*]] = "relax.exp"(%[[A]])
// CHECK:       return %[[E]], %[[B]]
func.func @reshape_shared(%x: !relax.tensor<["n", 4], f32>) -> (!relax.tensor<["4*n"], f32>, !relax.tensor<[2, "2*n"], f32>) {
  %0 = "relax.reshape"(%x) {shape = ["4*n"]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["4*n"], f32>
  %1 = "relax.reshape"(%0) {shape = [2, "2*n"]} : (!relax.tensor<["4*n"], f32>) -> !relax.tensor<[2, "2*n"], f32>
  %2 = "relax.exp"(%0) : (!relax.tensor<["4*n"], f32>) -> !relax.tensor<["4*n"], f32>
  return %2, %1 : !relax.tensor<["4*n"], f32>, !relax.tensor<[2, "2*n"], f32>
}

// -----

// Identity reshape, broadcast_to and astype disappear.
// CHECK-LABEL: func.func @identities
// CHECK-SAME:  (%[[X:.*]]: !relax.tensor<["n", 4], f32>)
// CHECK-NOT:   "relax.reshape"
// CHECK-NOT:   "relax.broadcast_to"
// CHECK-NOT:   "relax.astype"
// CHECK:       %[[E:.*]] = "relax.exp"(%[[X]])
// CHECK:       return %[[E]]
func.func @identities(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %0 = "relax.reshape"(%x) {shape = ["n", 4]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %1 = "relax.broadcast_to"(%0) {shape = ["n", 4]} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %2 = "relax.astype"(%1) {dtype = f32} : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %3 = "relax.exp"(%2) : (!relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  return %3 : !relax.tensor<["n", 4], f32>
}

// -----

// A real broadcast and a real cast stay.
// CHECK-LABEL: func.func @not_identities
// CHECK-SAME:  (%[[X:.*]]: !relax.tensor<[1, 4], f32>)
// CHECK:       %[[B:.*]] = "relax.broadcast_to"(%[[X]])
// CHECK:       %[[C:.*]] = "relax.astype"(%[[B]]) {dtype = f16}
// CHECK:       return %[[C]]
func.func @not_identities(%x: !relax.tensor<[1, 4], f32>) -> !relax.tensor<[3, 4], f16> {
  %0 = "relax.broadcast_to"(%x) {shape = [3, 4]} : (!relax.tensor<[1, 4], f32>) -> !relax.tensor<[3, 4], f32>
  %1 = "relax.astype"(%0) {dtype = f16} : (!relax.tensor<[3, 4], f32>) -> !relax.tensor<[3, 4], f16>
  return %1 : !relax.tensor<[3, 4], f16>
}

// -----

// permute(permute(x, [1, 2, 0]), [2, 0, 1]) is the identity permutation: it folds to x.
// CHECK-LABEL: func.func @permute_inverse
// CHECK-SAME:  (%[[X:.*]]: !relax.tensor<["a", "b", "c"], f32>)
// CHECK-NOT:   "relax.permute_dims"
// CHECK:       return %[[X]]
func.func @permute_inverse(%x: !relax.tensor<["a", "b", "c"], f32>) -> !relax.tensor<["a", "b", "c"], f32> {
  %0 = "relax.permute_dims"(%x) {axes = [1, 2, 0]} : (!relax.tensor<["a", "b", "c"], f32>) -> !relax.tensor<["b", "c", "a"], f32>
  %1 = "relax.permute_dims"(%0) {axes = [2, 0, 1]} : (!relax.tensor<["b", "c", "a"], f32>) -> !relax.tensor<["a", "b", "c"], f32>
  return %1 : !relax.tensor<["a", "b", "c"], f32>
}

// -----

// Two permutations compose into one: result[i] = x[a1[a2[i]]].
// CHECK-LABEL: func.func @permute_compose
// CHECK-SAME:  (%[[X:.*]]: !relax.tensor<["a", "b", "c"], f32>)
// CHECK:       %[[P:.*]] = "relax.permute_dims"(%[[X]]) {axes = [1, 0, 2]} : (!relax.tensor<["a", "b", "c"], f32>) -> !relax.tensor<["b", "a", "c"], f32>
// CHECK-NOT:   "relax.permute_dims"
// CHECK:       return %[[P]]
func.func @permute_compose(%x: !relax.tensor<["a", "b", "c"], f32>) -> !relax.tensor<["b", "a", "c"], f32> {
  %0 = "relax.permute_dims"(%x) {axes = [1, 2, 0]} : (!relax.tensor<["a", "b", "c"], f32>) -> !relax.tensor<["b", "c", "a"], f32>
  %1 = "relax.permute_dims"(%0) {axes = [0, 2, 1]} : (!relax.tensor<["b", "c", "a"], f32>) -> !relax.tensor<["b", "a", "c"], f32>
  return %1 : !relax.tensor<["b", "a", "c"], f32>
}

// -----

// Default axes (reverse) twice is the identity; an explicit identity permutation drops too.
// CHECK-LABEL: func.func @permute_default
// CHECK-SAME:  (%[[X:.*]]: !relax.tensor<["m", "n"], f32>)
// CHECK-NOT:   "relax.permute_dims"
// CHECK:       %[[A:.*]] = "relax.add"(%[[X]], %[[X]])
// CHECK:       return %[[A]]
func.func @permute_default(%x: !relax.tensor<["m", "n"], f32>) -> !relax.tensor<["m", "n"], f32> {
  %0 = "relax.permute_dims"(%x) : (!relax.tensor<["m", "n"], f32>) -> !relax.tensor<["n", "m"], f32>
  %1 = "relax.permute_dims"(%0) : (!relax.tensor<["n", "m"], f32>) -> !relax.tensor<["m", "n"], f32>
  %2 = "relax.permute_dims"(%x) {axes = [0, 1]} : (!relax.tensor<["m", "n"], f32>) -> !relax.tensor<["m", "n"], f32>
  %3 = "relax.add"(%1, %2) : (!relax.tensor<["m", "n"], f32>, !relax.tensor<["m", "n"], f32>) -> !relax.tensor<["m", "n"], f32>
  return %3 : !relax.tensor<["m", "n"], f32>
}

// -----

// Unknown dims are not an identity: ["?", "?"] to ["?", "?"] may still move data (2x3 to 3x2).
// CHECK-LABEL: func.func @unknown_dims
// CHECK-SAME:  (%[[X:.*]]: !relax.tensor<["?", "?"], f32>)
// CHECK:       %[[R:.*]] = "relax.reshape"(%[[X]]) {shape = [3, 2]}
// CHECK:       return %[[R]]
func.func @unknown_dims(%x: !relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32> {
  %0 = "relax.reshape"(%x) {shape = [3, 2]} : (!relax.tensor<["?", "?"], f32>) -> !relax.tensor<["?", "?"], f32>
  return %0 : !relax.tensor<["?", "?"], f32>
}

// -----

// A scalar constant reshaped and broadcast to a symbolic shape (as the JAX importer writes
// `x * 2.0`): the elementwise op takes the 0-d constant and broadcasts it itself.
// CHECK-LABEL: func.func @scalar_chain_into_elementwise
// CHECK-SAME:  (%[[X:.*]]: !relax.tensor<["n", 4], f32>)
// CHECK:       %[[C:.*]] = "relax.constant"() {value = dense<2.000000e+00> : tensor<f32>}
// CHECK-NOT:   "relax.reshape"
// CHECK-NOT:   "relax.broadcast_to"
// CHECK:       %[[M:.*]] = "relax.multiply"(%[[X]], %[[C]]) : (!relax.tensor<["n", 4], f32>, !relax.tensor<[], f32>) -> !relax.tensor<["n", 4], f32>
// CHECK:       return %[[M]]
func.func @scalar_chain_into_elementwise(%x: !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32> {
  %c = "relax.constant"() {value = dense<2.0> : tensor<f32>} : () -> !relax.tensor<[], f32>
  %0 = "relax.reshape"(%c) {shape = [1, 1]} : (!relax.tensor<[], f32>) -> !relax.tensor<[1, 1], f32>
  %1 = "relax.broadcast_to"(%0) {shape = ["n", 4]} : (!relax.tensor<[1, 1], f32>) -> !relax.tensor<["n", 4], f32>
  %2 = "relax.multiply"(%x, %1) : (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  return %2 : !relax.tensor<["n", 4], f32>
}

// -----

// Both branches of a where from one scalar chain each: the mask keeps the shape, so both fold.
// CHECK-LABEL: func.func @scalar_chains_into_where
// CHECK-SAME:  (%[[M:.*]]: !relax.tensor<["n", "m"], i1>)
// CHECK-DAG:   %[[A:.*]] = "relax.constant"() {value = dense<0.000000e+00> : tensor<f32>}
// CHECK-DAG:   %[[B:.*]] = "relax.constant"() {value = dense<0xFF800000> : tensor<f32>}
// CHECK-NOT:   "relax.broadcast_to"
// CHECK:       %[[W:.*]] = "relax.where"(%[[M]], %[[A]], %[[B]]) : (!relax.tensor<["n", "m"], i1>, !relax.tensor<[], f32>, !relax.tensor<[], f32>) -> !relax.tensor<["n", "m"], f32>
// CHECK:       return %[[W]]
func.func @scalar_chains_into_where(%m: !relax.tensor<["n", "m"], i1>) -> !relax.tensor<["n", "m"], f32> {
  %a = "relax.constant"() {value = dense<0.0> : tensor<f32>} : () -> !relax.tensor<[], f32>
  %b = "relax.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> !relax.tensor<[], f32>
  %0 = "relax.reshape"(%a) {shape = [1, 1]} : (!relax.tensor<[], f32>) -> !relax.tensor<[1, 1], f32>
  %1 = "relax.broadcast_to"(%0) {shape = ["n", "m"]} : (!relax.tensor<[1, 1], f32>) -> !relax.tensor<["n", "m"], f32>
  %2 = "relax.reshape"(%b) {shape = [1, 1]} : (!relax.tensor<[], f32>) -> !relax.tensor<[1, 1], f32>
  %3 = "relax.broadcast_to"(%2) {shape = ["n", "m"]} : (!relax.tensor<[1, 1], f32>) -> !relax.tensor<["n", "m"], f32>
  %4 = "relax.where"(%m, %1, %3) : (!relax.tensor<["n", "m"], i1>, !relax.tensor<["n", "m"], f32>, !relax.tensor<["n", "m"], f32>) -> !relax.tensor<["n", "m"], f32>
  return %4 : !relax.tensor<["n", "m"], f32>
}

// -----

// Two broadcast scalars: only one may become 0-d, or the sum would lose its shape.
// CHECK-LABEL: func.func @two_scalar_chains
// CHECK:       %[[C:.*]] = "relax.constant"() {value = dense<3> : tensor<i32>}
// CHECK:       %[[B:.*]] = "relax.broadcast_to"
// CHECK:       %[[S:.*]] = "relax.add"(%[[C]], %[[B]]) : (!relax.tensor<[], i32>, !relax.tensor<["n"], i32>) -> !relax.tensor<["n"], i32>
// CHECK:       return %[[S]]
func.func @two_scalar_chains(%x: !relax.tensor<["n"], i32>) -> !relax.tensor<["n"], i32> {
  %c = "relax.constant"() {value = dense<3> : tensor<i32>} : () -> !relax.tensor<[], i32>
  %0 = "relax.reshape"(%c) {shape = [1]} : (!relax.tensor<[], i32>) -> !relax.tensor<[1], i32>
  %1 = "relax.broadcast_to"(%0) {shape = ["n"]} : (!relax.tensor<[1], i32>) -> !relax.tensor<["n"], i32>
  %2 = "relax.add"(%1, %1) : (!relax.tensor<["n"], i32>, !relax.tensor<["n"], i32>) -> !relax.tensor<["n"], i32>
  return %2 : !relax.tensor<["n"], i32>
}

// -----

// To a static shape, the chain becomes one splat constant of that type.
// CHECK-LABEL: func.func @scalar_chain_static
// CHECK:       %[[C:.*]] = "relax.constant"() {value = dense<1.500000e+00> : tensor<3x4xf32>} : () -> !relax.tensor<[3, 4], f32>
// CHECK-NOT:   "relax.reshape"
// CHECK-NOT:   "relax.broadcast_to"
// CHECK:       return %[[C]]
func.func @scalar_chain_static() -> !relax.tensor<[3, 4], f32> {
  %c = "relax.constant"() {value = dense<1.5> : tensor<f32>} : () -> !relax.tensor<[], f32>
  %0 = "relax.reshape"(%c) {shape = [1, 1]} : (!relax.tensor<[], f32>) -> !relax.tensor<[1, 1], f32>
  %1 = "relax.broadcast_to"(%0) {shape = [3, 4]} : (!relax.tensor<[1, 1], f32>) -> !relax.tensor<[3, 4], f32>
  return %1 : !relax.tensor<[3, 4], f32>
}

// -----

// A constant that is not a splat stays broadcast. A scalar broadcast to a symbolic shape that is
// not consumed elementwise keeps its broadcast, of a [1, 1] splat (the static reshape folds).
// CHECK-LABEL: func.func @not_splat
// CHECK-SAME:  (%[[X:.*]]: !relax.tensor<["n", 4], f32>)
// CHECK:       %[[C:.*]] = "relax.constant"
// CHECK:       %[[B:.*]] = "relax.broadcast_to"(%[[C]]) {shape = ["n", 4]}
// CHECK:       %[[M:.*]] = "relax.multiply"(%[[X]], %[[B]])
// CHECK:       %[[S:.*]] = "relax.constant"() {value = dense<1.000000e+00> : tensor<1x1xf32>}
// CHECK-NOT:   "relax.reshape"
// CHECK:       %[[T:.*]] = "relax.broadcast_to"(%[[S]]) {shape = ["n", 4]}
// CHECK:       return %[[M]], %[[T]]
func.func @not_splat(%x: !relax.tensor<["n", 4], f32>) -> (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) {
  %c = "relax.constant"() {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>} : () -> !relax.tensor<[4], f32>
  %0 = "relax.broadcast_to"(%c) {shape = ["n", 4]} : (!relax.tensor<[4], f32>) -> !relax.tensor<["n", 4], f32>
  %1 = "relax.multiply"(%x, %0) : (!relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>) -> !relax.tensor<["n", 4], f32>
  %s = "relax.constant"() {value = dense<1.0> : tensor<f32>} : () -> !relax.tensor<[], f32>
  %2 = "relax.reshape"(%s) {shape = [1, 1]} : (!relax.tensor<[], f32>) -> !relax.tensor<[1, 1], f32>
  %3 = "relax.broadcast_to"(%2) {shape = ["n", 4]} : (!relax.tensor<[1, 1], f32>) -> !relax.tensor<["n", 4], f32>
  return %1, %3 : !relax.tensor<["n", 4], f32>, !relax.tensor<["n", 4], f32>
}

// -----

// A slice of a constant table is the sliced constant (polynomial coefficients sliced into
// scalars: each then a splat that kernels hold as an immediate, not a buffer they read); a slice
// of a non-constant, and a slice of a splat (a view of one value), stay.
// CHECK-LABEL: func.func @constant_slice
// CHECK-SAME:  (%[[X:.*]]: !relax.tensor<[4], f32>)
// CHECK-DAG:   %[[A:.*]] = "relax.constant"() {value = dense<2.000000e+00> : tensor<1xf32>}
// CHECK-DAG:   %[[B:.*]] = "relax.constant"() {value = dense<{{\[}}[5, 7], [9, 11]]> : tensor<2x2xi32>}
// CHECK-DAG:   %[[S:.*]] = "relax.strided_slice"(%[[X]])
// CHECK:       return %[[A]], %[[B]], %[[S]]
func.func @constant_slice(%x: !relax.tensor<[4], f32>) -> (!relax.tensor<[1], f32>, !relax.tensor<[2, 2], i32>, !relax.tensor<[2], f32>) {
  %c = "relax.constant"() {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>} : () -> !relax.tensor<[4], f32>
  %0 = "relax.strided_slice"(%c) {axes = [0], begin = [1], end = [2], strides = [1]} : (!relax.tensor<[4], f32>) -> !relax.tensor<[1], f32>
  %t = "relax.constant"() {value = dense<[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]> : tensor<3x4xi32>} : () -> !relax.tensor<[3, 4], i32>
  %1 = "relax.strided_slice"(%t) {axes = [0, 1], begin = [-2, 1], end = [3, 100], strides = [1, 2]} : (!relax.tensor<[3, 4], i32>) -> !relax.tensor<[2, 2], i32>
  %2 = "relax.strided_slice"(%x) {axes = [0], begin = [0], end = [2], strides = [1]} : (!relax.tensor<[4], f32>) -> !relax.tensor<[2], f32>
  return %0, %1, %2 : !relax.tensor<[1], f32>, !relax.tensor<[2, 2], i32>, !relax.tensor<[2], f32>
}
