# sftl — the two commands a fresh machine needs: `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Extras the test-suite exercises. torch is pinned (a CPU wheel lies on these machines).
EXTRAS ?= torch,tf,browser,conda,bert,plots,ray,dev
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
export PIP_DISABLE_PIP_VERSION_CHECK=1

.PHONY: install test demo lint bench lock readme clean confinement

install: $(STAMP) confinement

# The sandbox that runs report code: bubblewrap from the system's packages (as root with apt; quiet,
# skipped when bwrap is there). Never fails the install: without it sftl falls back to user namespaces,
# or refuses to run report code and says why (`sftl doctor`).
confinement:
	@command -v bwrap >/dev/null 2>&1 && exit 0; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing bubblewrap (the sandbox for report code) from the system's packages"; \
	  { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null 2>&1 || \
	    { apt-get update -qq >/dev/null 2>&1 && \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null 2>&1; }; } || \
	  echo "could not install bubblewrap with apt-get; sftl will use user namespaces where the kernel allows them"; \
	else \
	  echo "bubblewrap is not installed: sftl uses user namespaces where the kernel allows them, else refuses to"; \
	  echo "run report code (see 'sftl doctor'); to install it: sudo apt-get install bubblewrap"; \
	fi

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
