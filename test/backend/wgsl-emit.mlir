// RUN: %python -m relax_mlir.tools.emit_wgsl %s | FileCheck %s
// WGSL of target="webgpu" (backend/wgsl.py): buffers bind in argument order, every scalar and
// the logical grid live in ONE uniform struct after them, the workgroup size is the kernel's,
// and the logical workgroup id is recomputed from the (possibly folded) dispatch.

// An elementwise kernel: one index scalar (the dynamic dim), three buffers, a 2-D tile.
// CHECK-LABEL: // gpu.module @main_kernel
// CHECK:      struct Params {
// CHECK-NEXT:   a0: i32,
// CHECK-NEXT:   _gx: u32,
// CHECK-NEXT:   _gy: u32,
// CHECK-NEXT:   _gz: u32,
// CHECK-NEXT: }
// CHECK-NEXT: @group(0) @binding(0) var<storage, read_write> b1: array<f32>;
// CHECK-NEXT: @group(0) @binding(1) var<storage, read_write> b2: array<f32>;
// CHECK-NEXT: @group(0) @binding(2) var<storage, read_write> b3: array<f32>;
// CHECK-NEXT: @group(0) @binding(3) var<uniform> _p: Params;
// CHECK:      @compute @workgroup_size(8, 32, 1)
// CHECK-NEXT: fn main_kernel(@builtin(local_invocation_id) _lid: vec3<u32>, @builtin(workgroup_id) _wid: vec3<u32>, @builtin(num_workgroups) _nwg: vec3<u32>) {
// CHECK-NEXT:   let _lin = _wid.x + _nwg.x * (_wid.y + _nwg.y * _wid.z);
// CHECK-NEXT:   if (_lin >= _p._gx * _p._gy * _p._gz) { return; }
// CHECK-NEXT:   let [[BX:v[0-9]+]]: i32 = i32(_lin % _p._gx);
// CHECK:        exp(
func.func @main(%x: !relax.tensor<["n", 8], f32>, %b: !relax.tensor<[8], f32>) -> !relax.tensor<["n", 8], f32> {
  %a = "relax.add"(%x, %b) : (!relax.tensor<["n", 8], f32>, !relax.tensor<[8], f32>) -> !relax.tensor<["n", 8], f32>
  %e = "relax.exp"(%a) : (!relax.tensor<["n", 8], f32>) -> !relax.tensor<["n", 8], f32>
  return %e : !relax.tensor<["n", 8], f32>
}

// A cooperative row reduction: two index scalars, workgroup memory, barriers in a loop whose
// bounds are uniform (workgroup id, grid size, Params).
// CHECK-LABEL: // gpu.module @rowsum_kernel
// CHECK:      struct Params {
// CHECK-NEXT:   a0: i32,
// CHECK-NEXT:   a1: i32,
// CHECK:      @group(0) @binding(0) var<storage, read_write> b2: array<f32>;
// CHECK-NEXT: @group(0) @binding(1) var<storage, read_write> b3: array<f32>;
// CHECK-NEXT: @group(0) @binding(2) var<uniform> _p: Params;
// CHECK-NEXT: var<workgroup> [[WG:wg[0-9]+]]: array<f32, 256>;
// CHECK:      @compute @workgroup_size(32, 8, 1)
// CHECK:        for (var [[I:i[0-9]+]]: i32 = v{{[0-9]+}}; [[I]] < _p.a0; [[I]] = [[I]] + v{{[0-9]+}}) {
// CHECK:          [[WG]][{{v[0-9]+}}] = {{r[0-9]+}};
// CHECK-NEXT:     storageBarrier();
// CHECK-NEXT:     workgroupBarrier();
// The loop ends before its induction variable could wrap:
// CHECK:          if (u32(v{{[0-9]+}}) >= u32(_p.a0 - [[I]])) { break; }
func.func @rowsum(%x: !relax.tensor<["n", "k"], f32>) -> !relax.tensor<["n"], f32> {
  %s = "relax.sum"(%x) {axes = [1], keepdims = false} : (!relax.tensor<["n", "k"], f32>) -> !relax.tensor<["n"], f32>
  return %s : !relax.tensor<["n"], f32>
}

// A bool result: one byte an element in u32 words, written with atomics; the comparison is
// ordered (false on NaN, tested on the bits).
// CHECK-LABEL: // gpu.module @mask_kernel
// CHECK:      @group(0) @binding(2) var<storage, read_write> b3: array<atomic<u32>>;
// CHECK:      @compute @workgroup_size(32, 1, 1)
// CHECK:        let [[U:q[0-9]+]] = ((bitcast<u32>([[A:v[0-9]+]]) & 0x7fffffffu) > 0x7f800000u) || ((bitcast<u32>([[B:v[0-9]+]]) & 0x7fffffffu) > 0x7f800000u);
// CHECK-NEXT:   let [[M:v[0-9]+]]: bool = (![[U]] && ([[A]] < [[B]]));
// CHECK:        atomicAnd(&b3[{{q[0-9]+}}], ~(255u << {{q[0-9]+}}));
// CHECK-NEXT:   atomicOr(&b3[{{q[0-9]+}}], select(0u, 1u, [[M]]) << {{q[0-9]+}});
func.func @mask(%x: !relax.tensor<["n"], f32>, %y: !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], i1> {
  %s = "relax.less"(%x, %y) : (!relax.tensor<["n"], f32>, !relax.tensor<["n"], f32>) -> !relax.tensor<["n"], i1>
  return %s : !relax.tensor<["n"], i1>
}
