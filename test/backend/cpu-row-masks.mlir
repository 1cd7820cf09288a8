// RUN: relax-opt %s --relax-cpu-row-masks | FileCheck %s

// A partial register tile masked by exactly its slice's row count, from the slice's start, is a
// bounds check: the mask goes, the leading dim is no longer in bounds (convert-vector-to-scf then
// guards each row with scf.if around a plain vector store / load instead of 64-lane masked ones).
// CHECK-LABEL: func.func @row_tile
// CHECK:       %[[S:.*]] = memref.subview
// CHECK:       vector.transfer_write %{{.*}}, %[[S]][%{{.*}}, %{{.*}}] {in_bounds = [false, true]} : vector<4x64xf32>
// CHECK:       vector.transfer_read %[[S]][%{{.*}}, %{{.*}}], %{{.*}} {in_bounds = [false, true]} : memref<?x64xf32, strided<[256, 1], offset: ?>>, vector<4x64xf32>
func.func @row_tile(%m: memref<?x256xf32>, %i: index, %rows: index, %j: index) -> vector<4x64xf32> {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant dense<0.0> : vector<4x64xf32>
  %pad = arith.constant 0.0 : f32
  %s = memref.subview %m[%i, %j] [%rows, 64] [1, 1] : memref<?x256xf32> to memref<?x64xf32, strided<[256, 1], offset: ?>>
  %mask = vector.create_mask %rows, %c64 : vector<4x64xi1>
  vector.transfer_write %zero, %s[%c0, %c0], %mask {in_bounds = [true, true]} : vector<4x64xf32>, memref<?x64xf32, strided<[256, 1], offset: ?>>
  %r = vector.transfer_read %s[%c0, %c0], %pad, %mask {in_bounds = [true, true]} : memref<?x64xf32, strided<[256, 1], offset: ?>>, vector<4x64xf32>
  return %r : vector<4x64xf32>
}

// Left as they are: a mask bound that is not the slice's size, a transfer that does not start at
// the slice's first row, a mask that also cuts the columns.
// CHECK-LABEL: func.func @other_masks
// CHECK-COUNT-3: vector.transfer_write {{.*}}, %{{.*}} {in_bounds = [true, true]}
func.func @other_masks(%m: memref<?x256xf32>, %rows: index, %n: index, %cols: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant dense<0.0> : vector<4x64xf32>
  %s = memref.subview %m[0, 0] [%rows, 64] [1, 1] : memref<?x256xf32> to memref<?x64xf32, strided<[256, 1]>>
  %not_size = vector.create_mask %n, %c64 : vector<4x64xi1>
  vector.transfer_write %zero, %s[%c0, %c0], %not_size {in_bounds = [true, true]} : vector<4x64xf32>, memref<?x64xf32, strided<[256, 1]>>
  %mask = vector.create_mask %rows, %c64 : vector<4x64xi1>
  vector.transfer_write %zero, %s[%c1, %c0], %mask {in_bounds = [true, true]} : vector<4x64xf32>, memref<?x64xf32, strided<[256, 1]>>
  %cut = vector.create_mask %rows, %cols : vector<4x64xi1>
  vector.transfer_write %zero, %s[%c0, %c0], %cut {in_bounds = [true, true]} : vector<4x64xf32>, memref<?x64xf32, strided<[256, 1]>>
  return
}
