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

// The rows left from row %i (`min(dim - %i, 4)`, the A panel's reads) stay masked: where the tiles
// are full, masked loads cost nothing and per-row branches did (prefills 5-12% slower).
// CHECK-LABEL: func.func @panel_read
// CHECK:       vector.transfer_read %arg0[%arg1, %arg2], %{{.*}}, %{{.*}} {in_bounds = [true, true]} : memref<?x1024xf32>, vector<4x8xf32>
func.func @panel_read(%a: memref<?x1024xf32>, %i: index, %k: index) -> vector<4x8xf32> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %pad = arith.constant 0.0 : f32
  %dim = memref.dim %a, %c0 : memref<?x1024xf32>
  %left = arith.subi %dim, %i : index
  %rows = arith.minsi %c4, %left : index
  %mask = vector.create_mask %rows, %c8 : vector<4x8xi1>
  %r = vector.transfer_read %a[%i, %k], %pad, %mask {in_bounds = [true, true]} : memref<?x1024xf32>, vector<4x8xf32>
  return %r : vector<4x8xf32>
}

// Left as they are: a mask bound that is not the slice's size, a transfer that does not start at
// the slice's first row, a mask that also cuts the columns; rows left from another row than the
// access's; rows left clamped below the vector's rows.
// CHECK-LABEL: func.func @other_masks
// CHECK-COUNT-5: vector.transfer_write {{.*}}, %{{.*}} {in_bounds = [true, true]}
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
  %dim = memref.dim %m, %c0 : memref<?x256xf32>
  %left = arith.subi %dim, %n : index
  %from_n = vector.create_mask %left, %c64 : vector<4x64xi1>
  vector.transfer_write %zero, %m[%c1, %c0], %from_n {in_bounds = [true, true]} : vector<4x64xf32>, memref<?x256xf32>
  %c2 = arith.constant 2 : index
  %left1 = arith.subi %dim, %c1 : index
  %two = arith.minsi %left1, %c2 : index
  %clamped = vector.create_mask %two, %c64 : vector<4x64xi1>
  vector.transfer_write %zero, %m[%c1, %c0], %clamped {in_bounds = [true, true]} : vector<4x64xf32>, memref<?x256xf32>
  return
}
