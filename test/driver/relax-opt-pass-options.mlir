// A bad pass option value is a one-line option error when the pipeline is parsed, before the
// input is read, for every relax pass with options (as relax-fuse-kernels{max_buffers=abc} is);
// never "internal error in <pass>" from the run.
// RUN: not relax-opt %s '--relax-fuse-kernels=max_buffers=abc' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=FUSE --implicit-check-not=internal
// RUN: not relax-opt %s --relax-optimize --relax-gpu-map=block=abc 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BLOCK --implicit-check-not=internal
// RUN: not relax-opt %s --relax-optimize --relax-gpu-map=block=0,0 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BLOCK0 --implicit-check-not=internal
// RUN: not relax-opt %s --relax-gpu-to-ptx=chip=sm_1 2>&1 \
// RUN:   | FileCheck %s --check-prefix=CHIP --implicit-check-not=internal
// RUN: not relax-opt %s --relax-infer-shapes --relax-dispatch-library=mode=bogus 2>&1 \
// RUN:   | FileCheck %s --check-prefix=MODE --implicit-check-not=internal
// RUN: not relax-opt %s --relax-dispatch-library=min_static=-1 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STATIC --implicit-check-not=internal
// RUN: not relax-opt %s --relax-multiversion=mode=sometimes 2>&1 \
// RUN:   | FileCheck %s --check-prefix=MV --implicit-check-not=internal
// RUN: not relax-opt %s --relax-infer-shapes --relax-fuse-attention=min_keys=-1 2>&1 \
// RUN:   | FileCheck %s --check-prefix=KEYS --implicit-check-not=internal
// RUN: not relax-opt %s --relax-fuse-attention=fuse_bias=2 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BIAS --implicit-check-not=internal
// RUN: not relax-opt %s --relax-cpu-lower=num_threads=-3 2>&1 \
// RUN:   | FileCheck %s --check-prefix=THREADS --implicit-check-not=internal
// RUN: not relax-opt %s --relax-spirv-map=matmul_tile=24 2>&1 \
// RUN:   | FileCheck %s --check-prefix=TILE --implicit-check-not=internal
// RUN: not relax-opt %s '--pass-pipeline=builtin.module(relax-to-spirv{reduce_threads=3})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=REDUCE --implicit-check-not=internal

// FUSE: relax-opt: error: option max_buffers of relax-fuse-kernels takes an integer, got 'abc'
// BLOCK: relax-opt: error: option block of relax-gpu-map takes 1 to 3 thread counts such as 32,8 or 32x8, got 'abc'
// BLOCK0: relax-opt: error: invalid option of relax-gpu-map: block must be a tuple of 1 to 3 integers in 1..1024
// BLOCK0-SAME: (threads along x, y, z), got (0, 0)
// CHIP: relax-opt: error: invalid option of relax-gpu-to-ptx: chip must be an NVIDIA SM such as 'sm_90'
// CHIP-SAME: (or 'sm_90a'), one of sm_50, {{.*}}; got 'sm_1'
// MODE: relax-opt: error: option mode of relax-dispatch-library must be auto, always or never
// MODE-SAME: (or empty: RELAX_MLIR_LIBRARY), got 'bogus'
// STATIC: relax-opt: error: option min_static of relax-dispatch-library must be >= 0, got -1
// MV: relax-opt: error: option mode of relax-multiversion must be auto, always or never
// MV-SAME: (or empty: RELAX_MLIR_LIBRARY), got 'sometimes'
// KEYS: relax-opt: error: option min_keys of relax-fuse-attention must be >= 0 (0: no limit), got -1
// BIAS: relax-opt: error: option fuse_bias of relax-fuse-attention must be 0 or 1, got 2
// THREADS: relax-opt: error: option num_threads of relax-cpu-lower must be 0 (RELAX_MLIR_NUM_THREADS or the number
// THREADS-SAME: of CPUs) or a thread count up to 2147483647, got -3
// TILE: relax-opt: error: invalid option of relax-spirv-map: matmul_tile must be 0..16 or a multiple of 16 up to 128,
// TILE-SAME: got 24
// REDUCE: relax-opt: error: invalid option of relax-to-spirv: reduce_threads must be 0 or a power of two up to 1024,
// REDUCE-SAME: got 3
func.func @main(%x: !relax.tensor<["n", 64], f32>,
                %w: !relax.tensor<[64, 32], f32>) -> !relax.tensor<["n", 32], f32> {
  %0 = "relax.matmul"(%x, %w)
      : (!relax.tensor<["n", 64], f32>, !relax.tensor<[64, 32], f32>) -> !relax.tensor<["n", 32], f32>
  return %0 : !relax.tensor<["n", 32], f32>
}
