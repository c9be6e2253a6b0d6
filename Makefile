# kforge: the top-level Makefile delegates to the folders. `make help` lists the targets.
#   SANITIZE=address,undefined   build the C code with these sanitizers
#   CC, CFLAGS                   passed down to the C builds

BUILD    := $(abspath build)
PY       ?= $(abspath .venv/bin/python)
PYTEST   := $(PY) -m pytest
CLANG_FORMAT ?= clang-format
CLANG_FORMAT_VERSION := 14
export SANITIZE
export PYTHONPATH := $(abspath workers/harness)

# in build order: lib before the programs that link it
C_DIRS   := $(patsubst %/Makefile,%,$(wildcard sandbox/Makefile lib/Makefile server/Makefile workers/Makefile cli/Makefile))
# tracked and new (untracked, not ignored) C sources: a new file is formatted and checked before it is added
C_FILES   = $(shell git ls-files --cached --others --exclude-standard '*.c' '*.h' 2>/dev/null)
# C++ of our own (formatted like the C; the kernels under examples/ and tests/ keep their authors' layout)
CXX_FILES = $(shell git ls-files --cached --others --exclude-standard 'workers/harness/native/*.cpp' 2>/dev/null)

.PHONY: help deps build run test test-gpu bench bundle fmt fmt-check lint clean

help:
	@echo "make deps      install Debian packages and .venv (idempotent)"
	@echo "make run       the main job: start the stack, optimize every example task with the expert policy (cuda if a GPU is visible, else cpu), print the table"
	@echo "make test      every suite that runs without a GPU"
	@echo "make test-gpu  the suites that need a GPU (GPU host: KFORGE_NO_DEPS=1 KFORGE_JAIL_PREBUILT=1 PY=python3)"
	@echo "make bench     benchmarks (see bench/README.md)"
	@echo "make bundle    build/kforge-bundle.tar.gz: the service for an air-gapped GPU host"
	@echo "make fmt | fmt-check | lint | clean"

deps:
	@bash scripts/deps.sh

# KFORGE_JAIL_PREBUILT=1: use the C binaries already in build/ (carried to a GPU host that has no
# libseccomp-dev) instead of building them.
build: deps
	@mkdir -p $(BUILD)
	@if [ "$(KFORGE_JAIL_PREBUILT)" != 1 ]; then \
	    for d in $(C_DIRS); do $(MAKE) --no-print-directory -C $$d BUILD=$(BUILD) || exit 1; done; \
	    $(MAKE) --no-print-directory -C workers/harness/native BUILD=$(BUILD) PY=$(PY); fi

run: build
	@$(PY) scripts/run_examples.py

test: build fmt-check lint
	$(PYTEST) -n 2 --dist loadgroup --durations=40 -m "not gpu" tests

test-gpu: build
	$(PYTEST) -m gpu tests

bench: build
	@bash sandbox/bench_startup.sh
	@$(PY) bench/harness_bench.py
	@bash bench/service_bench.sh
	@$(PY) bench/episode_bench.py
	@$(PY) bench/expert_bench.py
	@n=$$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); if [ "$$n" -ge 2 ]; then $(PY) bench/scale_bench.py --gpus 0,1; \
	  else echo "scale_bench: needs two GPUs (found $$n); on cpu: $(PY) bench/scale_bench.py --backend cpu"; fi

bundle: build
	@bash scripts/bundle.sh

fmt: deps
	@$(CLANG_FORMAT) --version | grep -q "version $(CLANG_FORMAT_VERSION)\." || { echo "need clang-format $(CLANG_FORMAT_VERSION)"; exit 1; }
	@[ -z "$(C_FILES)$(CXX_FILES)" ] || $(CLANG_FORMAT) -i $(C_FILES) $(CXX_FILES)
	@$(PY) -m ruff format --quiet .

fmt-check: deps
	@$(CLANG_FORMAT) --version | grep -q "version $(CLANG_FORMAT_VERSION)\." || { echo "need clang-format $(CLANG_FORMAT_VERSION)"; exit 1; }
	@[ -z "$(C_FILES)$(CXX_FILES)" ] || $(CLANG_FORMAT) --dry-run --Werror $(C_FILES) $(CXX_FILES)
	@$(PY) -m ruff format --check --quiet .
	@echo "fmt-check: ok"

lint: deps
	@$(PY) -m ruff check --quiet .
	@[ -z "$(C_FILES)" ] || cppcheck --quiet --error-exitcode=1 --enable=warning,portability --std=c11 \
	    --suppress=missingIncludeSystem $(C_FILES)
	@echo "lint: ok"

clean:
	rm -rf $(BUILD)
