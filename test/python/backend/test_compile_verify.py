"""The CPU backend verifies the whole module once per stage, not after every pass of its pipelines
(verifying a 12-layer LLM after each of the to-llvm stage's passes cost more CPU than the passes),
and still reports IR broken inside a stage as a LoweringError naming the stage."""
from __future__ import annotations

import numpy as np
import pytest
from mlir import ir

from relax_mlir.backend import common, cpu

from test_cpu import ADD_RELU, compile_module, err_slot


class _RecordingPassManager:
    """Stands in for `mlir.passmanager.PassManager` in backend/common.py: records, per parsed
    pipeline, whether the verifier was left on."""

    runs: list[tuple[str, bool]] = []

    def __init__(self, pm, text: str):
        self.pm, self.text, self.verifier = pm, text, True

    @classmethod
    def parse(cls, text: str, context=None):
        from mlir.passmanager import PassManager

        return cls(PassManager.parse(text, context=context), text)

    def enable_verifier(self, flag: bool) -> None:
        self.verifier = flag
        self.pm.enable_verifier(flag)

    def run(self, op) -> None:
        _RecordingPassManager.runs.append((self.text, self.verifier))
        self.pm.run(op)


@pytest.fixture
def recorded(monkeypatch):
    _RecordingPassManager.runs = []
    verified: list[str] = []
    real_verify = common.verify

    def verify(module, stage, after):
        verified.append(stage)
        real_verify(module, stage, after)

    monkeypatch.setattr(common, "PassManager", _RecordingPassManager)
    monkeypatch.setattr(cpu, "verify", verify)
    monkeypatch.delenv("RELAX_MLIR_DEBUG", raising=False)
    return _RecordingPassManager.runs, verified


@pytest.mark.parametrize("threads", [1, 2])
def test_whole_module_passes_run_unverified_and_each_stage_verifies_once(recorded, threads):
    runs, verified = recorded
    with ir.Context():
        module = ir.Module.parse(ADD_RELU)
        cpu.lower(module, cpu.CPUOptions(num_threads=threads))
    whole = [text for text, on in runs if "transform-interpreter" not in text and "func.func(loop-invariant" not in text]
    assert whole, "the stages ran no whole-module pipeline"
    # Every whole-module pass ran without the verifier (the per-kernel scratch modules keep it).
    assert [t for t, on in runs if on and t in whole] == []
    for name in ("convert-func-to-llvm", "one-shot-bufferize", "buffer-deallocation-pipeline", "inline"):
        assert any(name in t for t in whole), name
    assert verified == ["calls", "bufferize", "parallelize", "to-llvm"]


def test_debug_verifies_after_every_pass(recorded, monkeypatch):
    runs, _ = recorded
    monkeypatch.setenv("RELAX_MLIR_DEBUG", "1")
    with ir.Context():
        module = ir.Module.parse(ADD_RELU)
        cpu.lower(module, cpu.CPUOptions(num_threads=1))
    assert runs and all(on for _t, on in runs)


def test_ir_broken_inside_a_stage_is_a_lowering_error(monkeypatch):
    """A step that leaves invalid IR (here: a function without its terminator) is caught at the end
    of its stage, before LLVM sees it."""

    def break_ir(op):
        for f in op.regions[0].blocks[0].operations:
            if f.operation.name == "llvm.func" and len(f.regions[0].blocks):
                block = f.regions[0].blocks[0]
                block.operations[len(block.operations) - 1].erase()
                return

    monkeypatch.setattr(cpu, "_internal_linkage", break_ir)
    with ir.Context():
        module = ir.Module.parse(ADD_RELU)
        with pytest.raises(cpu.LoweringError) as e:
            cpu.lower(module, cpu.CPUOptions(num_threads=1))
    assert e.value.stage == "to-llvm"


@pytest.mark.parametrize("threads", [1, 2])
def test_numerics_unchanged(threads):
    jit = compile_module(ADD_RELU, num_threads=threads)
    rng = np.random.default_rng(7)
    for n in (1, 13, 97):
        x = rng.standard_normal((n, 64)).astype(np.float32)
        b = rng.standard_normal(64).astype(np.float32)
        out, err = np.empty((n, 64), np.float32), err_slot()
        jit.invoke("main", x, b, out, err)
        assert err[0] == 0
        np.testing.assert_allclose(out, np.maximum(x + b, 0), rtol=1e-6)
