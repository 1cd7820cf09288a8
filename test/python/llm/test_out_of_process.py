"""`Generator(..., out_of_process=True)`: prefill and decode compiled in a child process and loaded
as CPU artifacts generate the same tokens as the in-process compile, with the weights bound once
and not copied (the artifacts' entries read the caller's arrays), and a KV cache overflow is still
a ValueError before native code runs."""
import os

import numpy as np
import pytest

import mlir.ir  # noqa: F401  (before transformers may import tensorflow)
import relax_mlir  # noqa: F401

os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

jax = pytest.importorskip("jax")
transformers = pytest.importorskip("transformers")

from relax_mlir.llm import Generator, from_hf_flax  # noqa: E402


def test_out_of_process_generates_the_same_tokens():
    from transformers import FlaxLlamaForCausalLM, LlamaConfig

    cfg = LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    # weights straight from flax (jax arrays): from_hf_flax views them with np.asarray, no copy
    model = FlaxLlamaForCausalLM(cfg, seed=0)
    lm = from_hf_flax(model)
    leaves = jax.tree.leaves(model.params)
    assert all(w.ctypes.data == j.unsafe_buffer_pointer() for w, j in zip(lm.weights, leaves))
    child = Generator(lm, 40, cache_chunk=8, out_of_process=True)  # first: before this process compiles
    here = Generator(lm, 40, cache_chunk=8)
    assert "exporter" not in child.decode_exe.artifacts  # a loaded artifact, not a compile in this process
    # the bound weights are the caller's arrays (partial keeps them; nothing copied)
    bound = child.decode_step._call.plan.bound
    assert all(bound[i] is w or bound[i].ctypes.data == w.ctypes.data for i, w in enumerate(lm.weights))
    prompts = [[5], [1, 2, 3, 4, 5, 6, 7], list(range(3, 23))]
    want = here.generate(prompts, max_new_tokens=12)
    assert child.generate(prompts, max_new_tokens=12) == want
    with pytest.raises(ValueError, match="KV cache overflow"):
        child.generate(prompts, max_new_tokens=30)


def test_failed_child_compile_is_a_compile_error_and_leaves_no_files(monkeypatch):
    """A compile the child refuses (an unknown CPU option) is a CompileError with the child's
    message (not its traceback), and the temporary directory of the exports is removed at once."""
    import tempfile

    from relax_mlir.llm import out_of_process

    made = []
    real = tempfile.TemporaryDirectory

    def recording(*a, **kw):
        made.append(real(*a, **kw))
        return made[-1]

    monkeypatch.setattr(out_of_process.tempfile, "TemporaryDirectory", recording)
    ex = jax.export.export(jax.jit(lambda x: x * 2))(jax.ShapeDtypeStruct((3,), np.float32))
    with pytest.raises(relax_mlir.CompileError, match=r"child process: CompileError: target 'cpu' has no option "
                                                      r"'bogus'") as e:
        out_of_process.compile_out_of_process([ex], "cpu", {"bogus": 1})
    assert "Traceback" not in str(e.value) and "RuntimeWarning" not in str(e.value), str(e.value)
    assert len(made) == 1 and not os.path.exists(made[0].name)
