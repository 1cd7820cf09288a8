// RUN: relax-import-stablehlo %s | FileCheck %s
// RUN: relax-import-stablehlo %s | relax-opt --relax-infer-shapes --relax-legalize | FileCheck %s --check-prefix=LEG
// Integer bit ops and element math (issue 16): and/or/not are logical on i1 and bitwise on
// integers; shifts saturate (an amount >= 32, or negative, selects 0 or the sign fill).

// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[A:.*]]: !relax.tensor<[8], i32>, %[[S:.*]]: !relax.tensor<[8], i32>, %[[F:.*]]: !relax.tensor<[8], f32>, %[[P:.*]]: !relax.tensor<[8], i1>)
// CHECK: %[[AND:.*]] = "relax.bitwise_and"(%[[A]], %[[S]]) : (!relax.tensor<[8], i32>, !relax.tensor<[8], i32>) -> !relax.tensor<[8], i32>
// CHECK: %[[OR:.*]] = "relax.bitwise_or"(%[[AND]], %[[S]])
// CHECK: %[[XOR:.*]] = "relax.bitwise_xor"(%[[OR]], %[[A]])
// CHECK: %[[NOT:.*]] = "relax.bitwise_not"(%[[XOR]])
// CHECK: %[[SHL:.*]] = "relax.left_shift"(%[[NOT]], %[[S]])
// CHECK: %[[SHR:.*]] = "relax.right_shift_logical"(%[[SHL]], %[[S]])
// CHECK: %[[SAR:.*]] = "relax.right_shift_arithmetic"(%[[SHR]], %[[S]])
// CHECK: %[[POP:.*]] = "relax.popcount"(%[[SAR]])
// CHECK: %[[CLZ:.*]] = "relax.count_leading_zeros"(%[[POP]])
// CHECK: %[[POW:.*]] = "relax.power"(%[[CLZ]], %[[S]])
// CHECK: %[[PNOT:.*]] = "relax.logical_not"(%[[P]])
// CHECK: %[[PAND:.*]] = "relax.logical_and"(%[[PNOT]], %[[P]])
// CHECK: %[[PXOR:.*]] = "relax.bitwise_xor"(%[[PAND]], %[[P]])
// CHECK: %[[FIN:.*]] = "relax.isfinite"(%[[F]])
// CHECK: %[[T:.*]] = "relax.tan"(%[[F]])
// CHECK: %[[C:.*]] = "relax.cbrt"(%[[T]])
// CHECK: %[[AT:.*]] = "relax.atan2"(%[[C]], %[[F]])
// CHECK: %[[RE:.*]] = "relax.round_even"(%[[AT]])
// CHECK: %[[RA:.*]] = "relax.round"(%[[RE]])
// CHECK: %[[BC:.*]] = "relax.bitcast"(%[[RA]]) {dtype = i32}
// CHECK: %[[RP:.*]] = "relax.reduce_precision"(%[[F]]) {exponent_bits = 5 : i64, mantissa_bits = 2 : i64}
// CHECK: return %[[POW]], %[[PXOR]], %[[FIN]], %[[BC]], %[[RP]]

// The shift kernels select the saturated value for amounts >= 32 (unsigned compare).
// LEG-LABEL: func.func private @left_shift
// LEG: %[[W:.*]] = arith.constant 32 : i32
// LEG: %[[BIG:.*]] = arith.cmpi uge, %{{.*}}, %[[W]] : i32
// LEG: %[[SH:.*]] = arith.shli
// LEG: arith.select %[[BIG]], %{{.*}}, %[[SH]] : i32
// LEG-LABEL: func.func private @right_shift_arithmetic
// LEG: %[[BIG2:.*]] = arith.cmpi uge
// LEG: %[[N:.*]] = arith.select %[[BIG2]]
// LEG: arith.shrsi %{{.*}}, %[[N]] : i32
// popcount and count_leading_zeros are plain arith (SWAR sums), which every target lowers.
// LEG-LABEL: func.func private @popcount
// LEG-NOT: math.
// LEG: arith.constant 1431655765 : i32
// LEG: arith.constant 16843009 : i32
// LEG-LABEL: func.func private @count_leading_zeros
// LEG-NOT: math.
// LEG: arith.constant 16 : i32
// LEG: arith.shrui
// LEG: arith.ori

module @jit_f attributes {jax.uses_shape_polymorphism = true} {
  func.func public @main(%a: tensor<8xi32>, %s: tensor<8xi32>, %f: tensor<8xf32>, %p: tensor<8xi1>) -> (tensor<8xi32>, tensor<8xi1>, tensor<8xi1>, tensor<8xi32>, tensor<8xf32>) {
    %0 = stablehlo.and %a, %s : tensor<8xi32>
    %1 = stablehlo.or %0, %s : tensor<8xi32>
    %2 = stablehlo.xor %1, %a : tensor<8xi32>
    %3 = stablehlo.not %2 : tensor<8xi32>
    %4 = stablehlo.shift_left %3, %s : tensor<8xi32>
    %5 = stablehlo.shift_right_logical %4, %s : tensor<8xi32>
    %6 = stablehlo.shift_right_arithmetic %5, %s : tensor<8xi32>
    %7 = stablehlo.popcnt %6 : tensor<8xi32>
    %8 = stablehlo.count_leading_zeros %7 : tensor<8xi32>
    %9 = stablehlo.power %8, %s : tensor<8xi32>
    %10 = stablehlo.not %p : tensor<8xi1>
    %11 = stablehlo.and %10, %p : tensor<8xi1>
    %12 = stablehlo.xor %11, %p : tensor<8xi1>
    %13 = stablehlo.is_finite %f : (tensor<8xf32>) -> tensor<8xi1>
    %14 = stablehlo.tan %f : tensor<8xf32>
    %15 = stablehlo.cbrt %14 : tensor<8xf32>
    %16 = stablehlo.atan2 %15, %f : tensor<8xf32>
    %17 = stablehlo.round_nearest_even %16 : tensor<8xf32>
    %18 = stablehlo.round_nearest_afz %17 : tensor<8xf32>
    %19 = stablehlo.bitcast_convert %18 : (tensor<8xf32>) -> tensor<8xi32>
    %20 = stablehlo.reduce_precision %f, format = e5m2 : tensor<8xf32>
    return %9, %12, %13, %19, %20 : tensor<8xi32>, tensor<8xi1>, tensor<8xi1>, tensor<8xi32>, tensor<8xf32>
  }
}
