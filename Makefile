# relax-mlir: `make test` and `make demo` set everything up in .venv themselves.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: test demo lit pytest setup irdl bench clean

setup: $(STAMP)
	-@command -v spirv-val >/dev/null || ((apt-get update -q && apt-get install -y -q spirv-tools mesa-vulkan-drivers libvulkan1) >/dev/null 2>&1 || true)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
	$(BIN)/python -m pip install -q -e '.[test,jax]'
	@touch $(STAMP)

test: setup
	$(BIN)/lit -sv test/
	$(BIN)/python -m pytest test/python

lit: setup
	$(BIN)/lit -sv test/

pytest: setup
	$(BIN)/python -m pytest test/python

demo: setup
	$(BIN)/python examples/demo.py

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
