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
