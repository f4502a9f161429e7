VENV ?= .venv
PY := $(VENV)/bin/python
# Versions CI tested; `make install CONSTRAINTS=` installs from pyproject's loose ranges instead.
CONSTRAINTS ?= constraints.txt
PIP_CONSTRAINTS := $(if $(CONSTRAINTS),-c $(CONSTRAINTS))
LATEST ?= .venv-latest
# Flower 1.42 pins typer < 0.21, rich < 15, protobuf < 7, packaging < 26 and its own ray, older
# than constraints.txt: its own venv, resolved by pip from Flower's pins (not constraints.txt).
FLOWER_VENV ?= .venv-flower
#: written when the Flower venv is complete: rebuilt only when pyproject.toml or this file change
FLOWER_STAMP := $(FLOWER_VENV)/.privfl-installed
# torch stays at 2.13.0 (CPU build) everywhere: any other torch spec pulls GBs of CUDA wheels.
TORCH := torch==2.13.0

.PHONY: install data test test-kernels test-slow test-ray test-browser test-flower flower-venv test-latest lock lint \
	test-flwr-datasets \
	bench mutants audit-mutants

install:
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(PIP_CONSTRAINTS) $(TORCH)
	$(PY) -m pip install --quiet $(PIP_CONSTRAINTS) -e '.[dev]'
	$(MAKE) --no-print-directory data

# The offline data the tests and demos use (Debian's dataset-fashion-mnist), where this machine
# can install it (root with apt-get; it waits up to APT_WAIT seconds for another apt or dpkg to
# release its lock); elsewhere the tests that need it skip and say why.
APT_WAIT ?= 300
FMNIST_USERS := configs/demo-dp-ftrl.yaml, configs/demo-bandmf.yaml and the Fashion-MNIST \
	configs of configs/zheng2021, xie2023, hasircioglu2022 and asoodeh2021
data:
	@if [ -d /usr/share/datasets/fashion-mnist ]; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		{ apt-get -o DPkg::Lock::Timeout=$(APT_WAIT) update -qq \
		&& DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=$(APT_WAIT) \
			install -y -qq dataset-fashion-mnist; } \
		|| { echo "make: could not install dataset-fashion-mnist (apt-get failed above; if" \
			"another apt or dpkg held its lock for $(APT_WAIT) s, run make data again):" \
			"$(FMNIST_USERS) need it, and their tests will skip" >&2; }; \
	else \
		echo "make: dataset-fashion-mnist is not installed (as root: apt-get install" \
			"dataset-fashion-mnist): $(FMNIST_USERS) need it, and their tests will skip" >&2; \
	fi

# the default suite on every core (pytest-xdist; a test file stays on one worker): about twice as
# fast as one process on 2 cores. The slow suite too; the mutants run two at a time.
# DATA_READERS: the tests that looked for optional data (tests/conftest.py); the slow suite's
# test_make_test_passes_without_the_data runs just those again with the data hidden
DATA_READERS := .test-data-readers
test:
	rm -f $(DATA_READERS)
	PRIVFL_TEST_DATA_READERS=$(CURDIR)/$(DATA_READERS) $(PY) -m pytest -n auto --dist loadfile \
		--durations=15

test-slow:
	$(PY) -m pytest -m slow -n auto --dist loadfile --durations=25

# The tests whose numbers two CPUs must agree on (the goldens; a run's privacy against `privfl
# account`; the training goldens with their measured tolerances), under other kernels than this
# CPU's: an AVX2 machine (ATen's AVX2 build, oneDNN up to AVX2, NumPy without its AVX-512
# dispatch) and an old one (ATen's DEFAULT, oneDNN SSE4.1, NumPy without AVX2). A test that passes
# only on the CPU that wrote its goldens fails here. Each setting first checks that torch and
# NumPy took it.
KERNEL_TESTS ?= tests/golden tests/fl/algorithms/test_prifedsync_golden.py \
	tests/fl/algorithms/test_correlated.py tests/fl/algorithms/test_dp_fedavg.py \
	tests/accounting/test_dispatch.py tests/mechanisms tests/cli/test_account_cli.py \
	tests/cli/test_correlated_cli.py
KERNEL_CHECK = import os, torch; got = torch.backends.cpu.get_cpu_capability(); \
	print("torch kernels:", got, "| oneDNN up to", os.environ["ONEDNN_MAX_CPU_ISA"], \
	"| NumPy dispatch off:", os.environ["NPY_DISABLE_CPU_FEATURES"]); \
	assert got == os.environ["WANT"], f"ATEN_CPU_CAPABILITY ignored: torch runs {got}"
test-kernels:
	export ATEN_CPU_CAPABILITY=avx2 WANT=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 \
		NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR" \
		&& $(PY) -c '$(KERNEL_CHECK)' && $(PY) -m pytest -n auto --dist loadfile $(KERNEL_TESTS)
	export ATEN_CPU_CAPABILITY=default WANT=DEFAULT ONEDNN_MAX_CPU_ISA=SSE41 \
		NPY_DISABLE_CPU_FEATURES="X86_V3 X86_V4 AVX512_ICL AVX512_SPR" \
		&& $(PY) -c '$(KERNEL_CHECK)' && $(PY) -m pytest -n auto --dist loadfile $(KERNEL_TESTS)

# The Ray backend against the local one (a local Ray instance on 127.0.0.1; installs the extra).
test-ray:
	$(PY) -m pip install --quiet $(PIP_CONSTRAINTS) -e '.[ray]'
	$(PY) -m pytest -m ray

# report.html in a real browser: Debian's chromium and chromium-driver (installed with apt where
# this machine can, as .ci/run does; never a downloaded browser build), driven by selenium.
test-browser:
	@if ! command -v chromium >/dev/null && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			chromium chromium-driver; \
	fi
	$(PY) -m pip install --quiet $(PIP_CONSTRAINTS) -e '.[browser]'
	$(PY) -m pytest -m browser

# privfl inside Flower (privfl.flower, docs/flower.md) and MLflow tracking, in .venv-flower:
# torch pinned (CPU build), then privfl with the flower, mlflow and data extras. `make flower-venv`
# builds the venv alone (.ci/run builds it in the background while the other stages run).
test-flower: $(FLOWER_STAMP)
	$(FLOWER_VENV)/bin/python -m pytest -m 'flower or mlflow' tests/flower tests/runs/test_mlflow.py

flower-venv: $(FLOWER_STAMP)

$(FLOWER_STAMP): pyproject.toml Makefile
	python3 -m venv $(FLOWER_VENV)
	$(FLOWER_VENV)/bin/python -m pip install --quiet --upgrade pip
	echo '$(TORCH)' > $(FLOWER_VENV)/torch-pin.txt
	$(FLOWER_VENV)/bin/python -m pip install --quiet -c $(FLOWER_VENV)/torch-pin.txt $(TORCH)
	$(FLOWER_VENV)/bin/python -m pip install --quiet -c $(FLOWER_VENV)/torch-pin.txt \
		-e '.[flower,mlflow,data,flwr-datasets]' pytest hypothesis
	touch $@

# data.source: flwr-datasets (Flower Datasets, docs/natural-data.md) in the Flower venv: its
# partitioners on a parquet dataset the tests write (the Hugging Face hub is never contacted)
test-flwr-datasets: $(FLOWER_STAMP)
	$(FLOWER_VENV)/bin/python -m pytest tests/data/test_flower_datasets.py

# The newest releases pyproject allows (torch still pinned, see TORCH), in a separate venv.
test-latest:
	python3 -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install --quiet --upgrade pip
	echo '$(TORCH)' > $(LATEST)/torch-pin.txt
	$(LATEST)/bin/python -m pip install --quiet -c $(LATEST)/torch-pin.txt $(TORCH)
	$(LATEST)/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager \
		-c $(LATEST)/torch-pin.txt -e '.[dev,ray]'  # ray too, so that `make lock` keeps its pins
	$(LATEST)/bin/python -m pip list --format=freeze --exclude-editable 2>/dev/null \
		| grep -E '^(numpy|scipy|dp-accounting|torch|opacus|pytest)=='
	$(MAKE) test VENV=$(LATEST)

# After `make test-latest` passes: record its versions as the tested set (keeps the header).
lock:
	{ sed -n '/^#/!q;p' $(CONSTRAINTS); \
	  $(LATEST)/bin/python -m pip freeze --exclude-editable | sed -E 's/\+[A-Za-z0-9.]+$$//'; \
	} > $(CONSTRAINTS).new && mv $(CONSTRAINTS).new $(CONSTRAINTS)

lint:
	$(VENV)/bin/ruff check src tests benchmarks configs

# Planted privacy bugs (tests/mutants/mutants.yaml), each in a temporary copy of the sources: every
# one must make the tests of its area fail (docs/mutants.md). `make mutants MUTANTS=a,b`: a subset.
MUTANTS ?=
mutants:
	$(PY) tests/mutants/run.py $(if $(MUTANTS),--only $(MUTANTS))

# The empirical audit (privfl audit run) against the noise and clipping mutants of the client-level
# algorithms: how many it catches (a report, not a gate; docs/audit.md). MUTANTS=a,b: a subset.
audit-mutants:
	$(PY) tests/mutants/audit.py $(if $(MUTANTS),--only $(MUTANTS))

bench:
	$(PY) benchmarks/accounting.py
