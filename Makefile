# Two commands do all the set-up on a fresh clone:
#   make demo   - a local swarm learning a generated signal task (its page live at /)
#   make test   - lint and the whole test suite (what CI runs)
#   make test-fast - the tests that start no process, for the edit loop
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Two stamps, two installs into the one venv: the demo needs the package and its plot library,
# the tests the whole toolchain (pytest, ruff, selenium, scipy...: about ten times the download).
DEMO_STAMP := $(VENV)/.installed-demo
TEST_STAMP := $(VENV)/.installed-test
# The C sources too: an editable install compiles the optional int8 kernel (kernels/_int8.c) once,
# at install; a change to them needs these rules to run again.
INSTALL_DEPS := pyproject.toml setup.py $(wildcard kernels/_int8*.[ch])

.PHONY: venv demo test test-fast lint format gpu-test bench clean

$(DEMO_STAMP): $(INSTALL_DEPS)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[plot]'
	touch $(DEMO_STAMP)

# The test extra holds the plot library too: the demo's stamp is then up to date as well.
$(TEST_STAMP): $(INSTALL_DEPS)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(TEST_STAMP) $(DEMO_STAMP)

venv: $(TEST_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/swarmnode demo

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(TEST_STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Two workers, a test file each at a time: most of the suite's time is real processes waiting
# on timelines and heartbeats (one worker took 14.3 min on the 2-core box, two 9.0 min). Files
# go out in the order tests/conftest.py sets: those that start processes first.
test: lint
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder

# The edit loop: everything but the tests that start processes (marked slow), on two workers
# as `make test` (one worker took 142 s on the loaded 2-core box).
test-fast: $(TEST_STAMP)
	$(BIN)/python -m pytest -m "not slow" -n 2 --dist loadfile

gpu-test: $(TEST_STAMP)
	$(BIN)/python -m pytest -m gpu

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache kernels/*.so
