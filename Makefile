# relax-mlir: `make test` and `make demo` set everything up in .venv themselves.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
# pytest workers (pytest-xdist): one per core, at most 4 (each holds jax, the MLIR bindings and
# tensorflow for the zoo's gemma). PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 4 ] && n=4; echo $$n)

.PHONY: test demo lit pytest setup irdl bench clean fuzz fuzz-malformed

setup: $(STAMP)
	-@command -v spirv-val >/dev/null || ((apt-get update -q && apt-get install -y -q spirv-tools mesa-vulkan-drivers libvulkan1) >/dev/null 2>&1 || true)
	-@command -v chromium-headless-shell >/dev/null || ((apt-get update -q && apt-get install -y -q chromium-headless-shell) >/dev/null 2>&1 || true)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
	$(BIN)/python -m pip install -q -e '.[test,jax,models,web,mpi]'
	@touch $(STAMP)

test: setup
	$(BIN)/lit -sv test/
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --durations=30 test/python

lit: setup
	$(BIN)/lit -sv test/

pytest: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --durations=30 test/python

demo: setup
	$(BIN)/python examples/demo.py

# Long fuzz campaigns (the CI runs a fixed seed set of each through `make test`).
# Differential: 5,000 random JAX programs from seed 2400000 vs jax.jit, 500 of them also on Vulkan
# (about 2.5 h on 2 cores); every result in fuzz-results.jsonl, every failure with a runnable repro.
fuzz: setup
	$(BIN)/python test/python/fuzz/campaign.py --programs $${FUZZ_PROGRAMS:-5000} --first-seed $${FUZZ_FIRST_SEED:-2400000} --vulkan $${FUZZ_VULKAN:-500} --out fuzz-results.jsonl

# Malformed IR: 20,000 mutants of the lit inputs and of exported StableHLO through relax-opt and
# relax-import-stablehlo (no signal, no traceback, every error located).
fuzz-malformed: setup
	RELAX_MLIR_FUZZ_MUTANTS=$${RELAX_MLIR_FUZZ_MUTANTS:-20000} RELAX_MLIR_FUZZ_SEED=$${RELAX_MLIR_FUZZ_SEED:-1} $(BIN)/python -m pytest -q test/python/fuzz/test_malformed_ir.py

irdl: setup
	$(BIN)/python -m relax_mlir.dialect.irdl_emit

bench: setup
	$(BIN)/python -m pip install -q -e '.[test,jax,bench]'
	$(BIN)/python bench/shape_deduction.py
	$(BIN)/python bench/mlp.py
	$(BIN)/python bench/transformer.py
	$(BIN)/python bench/decoder.py
	$(BIN)/python bench/plot.py

clean:
	rm -rf build test/**/Output .pytest_cache
