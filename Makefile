# sftl — the two commands a fresh machine needs: `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Extras the test-suite exercises. torch is pinned (a CPU wheel lies on these machines).
EXTRAS ?= torch,tf,browser,conda,bert,plots,ray,dev
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
export PIP_DISABLE_PIP_VERSION_CHECK=1

.PHONY: install test demo lint bench lock readme clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	# torch first, pinned: otherwise a dependency may pull a multi-GB CUDA build
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	rm -f $(VENV)/.installed-*; touch $@

test: install
	$(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

demo: install
	$(BIN)/python bench/demo.py

lint: install
	$(BIN)/ruff check sftl tests bench
	$(BIN)/mypy sftl

bench: install
	$(BIN)/python bench/run_all.py

# the README's generated sections: Structure (the modules' docstrings) and exit codes (sftl/errors.py)
readme:
	$(PY) tools/readme_sections.py --write

lock: install
	$(BIN)/sftl envs lock

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
