# Two commands on a fresh machine: `make demo` and `make test`. Each sets up .venv first.
# Every environment is built from a lock in locks/ (exact versions with hashes, installed by
# uv): what a fresh machine installs is what was tested. pyproject.toml keeps ranges
# (tracefact is a library); `make lock` refreshes the locks, `make test-latest` tries the
# newest releases in a throwaway venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# uv itself, installed by pip from its own hashed lock (locks/uv.txt).
UV_HOME := .uv
UV := $(UV_HOME)/bin/uv
# pip must never pick the compromised litellm releases, whatever asks for litellm; uv gets the
# same constraints wherever it resolves (`make lock`, `make test-latest`): a lock is exact.
export PIP_CONSTRAINT := $(CURDIR)/constraints.txt
CONSTRAINTS := constraints.txt
# The build backend for editable installs and `make dist`, pinned like everything else.
export UV_BUILD_CONSTRAINT := $(CURDIR)/locks/build.txt
export PIP_DISABLE_PIP_VERSION_CHECK := 1
export UV_NO_PROGRESS := 1

.PHONY: setup setup-dev demo test lint bench clean e2e chaos test-instrumentors fixtures \
	prometheus-tools test-prometheus terminal-deps redis-server test-queues lock test-latest \
	dist test-wheel test-agents agent-fixtures test-faults bench-all

$(UV): locks/uv.txt
	rm -rf $(UV_HOME)
	$(PYTHON) -m venv $(UV_HOME)
	$(UV_HOME)/bin/python -m pip install -q --require-hashes --no-deps -r locks/uv.txt
	touch $@

# $(call locked_venv,DIR,LOCK): DIR holds exactly LOCK's packages, plus tracefact editable.
define locked_venv
	test -x $(1)/bin/python || $(UV) venv -q --python $(PYTHON) $(1)
	$(UV) pip sync -q --require-hashes --python $(1)/bin/python $(2)
	$(UV) pip install -q --no-deps --python $(1)/bin/python -e .
endef

$(VENV)/.runtime: $(UV) locks/runtime.txt pyproject.toml
	$(call locked_venv,$(VENV),locks/runtime.txt)
	rm -f $(VENV)/.dev
	touch $@

# The dev lock holds the runtime lock's versions, so .venv serves `make demo` too.
$(VENV)/.dev: $(UV) locks/dev.txt pyproject.toml
	$(call locked_venv,$(VENV),locks/dev.txt)
	touch $@ $(VENV)/.runtime

setup: $(VENV)/.runtime
setup-dev: $(VENV)/.dev

# Refresh every lock to the newest releases pyproject.toml and the e2e requirements allow.
# Review the diff and run `make test` (and .ci/run) before committing it.
LOCK_FLAGS = -q --upgrade --generate-hashes --python-version 3.11 -c $(CONSTRAINTS) \
	--custom-compile-command "make lock"
lock: $(UV)
	$(UV) pip compile $(LOCK_FLAGS) locks/uv.in -o locks/uv.txt
	$(UV) pip compile $(LOCK_FLAGS) locks/build.in -o locks/build.txt
	$(UV) pip compile $(LOCK_FLAGS) pyproject.toml --extra dev -o locks/dev.txt
	$(UV) pip compile $(LOCK_FLAGS) pyproject.toml -c locks/dev.txt -o locks/runtime.txt
	$(UV) pip compile $(LOCK_FLAGS) pyproject.toml --extra dev --extra instrumentors \
		-o locks/instrumentors.txt
	$(UV) pip compile $(LOCK_FLAGS) pyproject.toml --extra dev --extra agents -o locks/agents.txt
	$(UV) pip compile $(LOCK_FLAGS) pyproject.toml --extra bench -o locks/bench.txt
	for env in phoenix mlflow browser; do \
		$(UV) pip compile $(LOCK_FLAGS) e2e/requirements-$$env.txt -o locks/e2e-$$env.txt || exit 1; \
	done

# The suite against the newest releases, in a throwaway venv: run it before `make lock`, or
# when a user reports a break with a newer dependency. Not part of .ci/run.
LATEST_VENV := .venv-latest
test-latest: $(UV)
	rm -rf $(LATEST_VENV)
	$(UV) venv -q --python $(PYTHON) $(LATEST_VENV)
	$(UV) pip install -q --upgrade -c $(CONSTRAINTS) --python $(LATEST_VENV)/bin/python -e ".[dev]"
	$(LATEST_VENV)/bin/ruff check .
	$(LATEST_VENV)/bin/mypy
	$(LATEST_VENV)/bin/pytest -q -p no:cacheprovider

# The sdist and the wheel, under dist/.
dist: $(UV)
	rm -rf dist
	$(UV) build -q --python $(PYTHON) --out-dir dist

# The wheel installed (not editable) into a fresh venv, outside any source tree.
test-wheel: dist $(VENV)/.dev
	TRACEFACT_WHEEL=$$(ls dist/tracefact-*.whl) TRACEFACT_UV=$(CURDIR)/$(UV) \
		$(BIN)/pytest -q -p no:cacheprovider tests/release

# The demo writes its spans to a file (OTLP/JSON lines) and ends with the report drawn from it.
DEMO_OUT := .demo

demo: setup
	@mkdir -p $(DEMO_OUT) && rm -f $(DEMO_OUT)/spans.jsonl
	$(BIN)/python examples/rag_demo.py --requests 240 --spans $(DEMO_OUT)/spans.jsonl
	$(BIN)/tracefact report $(DEMO_OUT)/spans.jsonl --html $(DEMO_OUT)/report.html

lint: setup-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -q

# tmux from Debian, for `tracefact monitor`'s test in a real terminal (tests/monitor/
# test_terminal.py skips without it, except under CI=true). CI runs this before `make test`.
terminal-deps:
	@command -v tmux >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		tmux >/dev/null; }

# Real third-party instrumentors (OpenInference, OpenTelemetry GenAI, OpenLLMetry, LangChain)
# against the fake OpenAI server, in their own virtual environment: they patch the openai SDK.
INSTRUMENTORS_VENV := .venv-instrumentors

$(INSTRUMENTORS_VENV)/.installed: $(UV) locks/instrumentors.txt pyproject.toml
	$(call locked_venv,$(INSTRUMENTORS_VENV),locks/instrumentors.txt)
	touch $@

INSTRUMENTOR_NAMES := openinference openai_v2 openllmetry langchain

# One process per instrumentor: two instrumentors of the openai SDK do not fully undo
# each other. The examples run in their own subprocesses.
test-instrumentors: $(INSTRUMENTORS_VENV)/.installed
	for name in $(INSTRUMENTOR_NAMES); do \
		TRACEFACT_INSTRUMENTOR=$$name $(INSTRUMENTORS_VENV)/bin/pytest -q -p no:cacheprovider \
			tests/instrumentors/test_labels.py || exit 1; \
	done
	$(INSTRUMENTORS_VENV)/bin/pytest -q -p no:cacheprovider tests/instrumentors/test_examples.py \
		tests/instrumentors/test_collector_example.py

# Re-record tests/fixtures/otlp from the pinned instrumentors (commit the result). Those
# pinned to another release (Instrumentor.pinned: OpenLLMetry openai 0.54.0, chromadb,
# langchain) are recorded from a scratch venv: see the script's docstring.
fixtures: $(INSTRUMENTORS_VENV)/.installed
	$(INSTRUMENTORS_VENV)/bin/python scripts/record_instrumentor_fixtures.py tests/fixtures/otlp

# Real agent frameworks (pydantic-ai, the OpenAI Agents SDK with OpenInference, LangGraph with
# OpenInference) calling tools through the fake OpenAI server, in their own virtual environment:
# answers judged against tool results, through the SDK and through `tracefact collector`.
AGENTS_VENV := .venv-agents

$(AGENTS_VENV)/.installed: $(UV) locks/agents.txt pyproject.toml
	$(call locked_venv,$(AGENTS_VENV),locks/agents.txt)
	touch $@

test-agents: $(AGENTS_VENV)/.installed
	$(AGENTS_VENV)/bin/pytest -q -p no:cacheprovider tests/agents

# Re-record tests/fixtures/otlp-agents from the pinned frameworks (commit the result).
agent-fixtures: $(AGENTS_VENV)/.installed
	$(AGENTS_VENV)/bin/python scripts/record_instrumentor_fixtures.py --agents \
		tests/fixtures/otlp-agents

# The fault-injection suite at length (make test runs a quick round of it). Its evaluators
# raise SystemExit, GeneratorExit and RecursionError on purpose; once, pytest's hook for
# what the interpreter reports as unraisable (from a finalizer) hit the recursion limit
# formatting one and failed a run whose every property held. Python's own hook prints them.
chaos: setup-dev
	TRACEFACT_CHAOS_EXAMPLES=500 $(BIN)/pytest -q -p no:unraisableexception tests/pipeline/test_chaos.py

# Debian's redis-server for the Redis Streams queue's tests; the tests start their own
# servers on 127.0.0.1 (the package's service is not used).
redis-server:
	command -v redis-server >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		redis-server >/dev/null; }

# The collector's durable queues: contract tests of every backend, crash and scale-out
# tests with subprocesses on SQLite and a real Redis (under CI=true a missing Redis fails).
test-queues: setup-dev redis-server
	TRACEFACT_QUEUE_CRASH_TESTS=1 $(BIN)/pytest -q tests/collector/queues

# The collector through faults (subprocesses): SQLite locked by another process and on a
# full disk (a 2 MiB tmpfs where the machine can mount one), a file that is not a queue, a
# real Redis refusing writes (READONLY, OOM); make test runs the in-process half.
test-faults: setup-dev redis-server
	TRACEFACT_FAULT_TESTS=1 $(BIN)/pytest -q tests/collector/faults

# The peers of the SDK benchmark (traceloop, OpenInference, logfire) in their own virtual
# environment: they pin OpenTelemetry releases of their own, and never enter .venv.
BENCH_VENV := .venv-bench

$(BENCH_VENV)/.installed: $(UV) locks/bench.txt pyproject.toml
	$(call locked_venv,$(BENCH_VENV),locks/bench.txt)
	touch $@

# The issue table: `| path | measured | goal |`, the SDK's rows (peers included, from the
# bench environment) then the collector's; `make bench-all` also runs every other benchmark.
bench: setup-dev $(BENCH_VENV)/.installed
	@echo "| path | measured | goal |"
	@echo "|---|---|---|"
	@$(BENCH_VENV)/bin/python benchmarks/sdk.py --table
	@$(BIN)/python benchmarks/collector.py --table

bench-all: bench
	for script in benchmarks/*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

# End to end against real backends (Phoenix, MLflow) and a real browser (which also opens
# the demo's report with the network cut off and retakes its README picture), each installed
# in its own virtual environment under .e2e/, never in .venv; chromium comes from apt.
E2E := .e2e
E2E_ENVS := $(E2E)/phoenix/.installed $(E2E)/mlflow/.installed $(E2E)/browser/.installed

$(E2E)/%/.installed: locks/e2e-%.txt $(UV)
	rm -rf $(E2E)/$*
	$(UV) venv -q --python $(PYTHON) $(E2E)/$*
	$(UV) pip sync -q --require-hashes --python $(E2E)/$*/bin/python $<
	touch $@

# Prints how long a step took: $(call timed,what,command)
timed = @t=$$(date +%s); $(2) && echo "[e2e] $(1): $$(( $$(date +%s) - t ))s"

# The collector check runs the OpenInference demo app and the collector from the
# instrumentors' environment (openai, the OpenInference instrumentor, the collector extra).
# The monitoring end to end runs the project's Python with the prometheus extra (in the dev lock).
e2e: setup-dev prometheus-tools $(INSTRUMENTORS_VENV)/.installed
	$(call timed,chromium from apt,command -v chromium >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		chromium fonts-liberation >/dev/null; })
	$(call timed,phoenix/mlflow/browser venvs,$(MAKE) --no-print-directory -j3 $(E2E_ENVS))
	$(BIN)/python -m e2e.phoenix_check
	$(BIN)/python -m e2e.review_check
	$(BIN)/python -m e2e.mlflow_check
	$(BIN)/python -m e2e.prometheus_check
	$(INSTRUMENTORS_VENV)/bin/python -m e2e.collector_check
	$(call timed,the demo's report in the browser,$(MAKE) --no-print-directory demo >/dev/null && \
		$(E2E)/browser/bin/python -m e2e.report_browser $(DEMO_OUT)/report.html docs/img/report.png)

# Debian's Prometheus and Alertmanager (promtool and amtool come with them), from apt.
prometheus-tools:
	@command -v promtool >/dev/null && command -v prometheus-alertmanager >/dev/null || { \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends prometheus prometheus-alertmanager >/dev/null; }

# The recording and alerting rules of collector/prometheus/, unit-tested with promtool.
test-prometheus: prometheus-tools
	promtool check config collector/prometheus/prometheus.yml
	amtool check-config collector/prometheus/alertmanager.yml
	promtool test rules collector/prometheus/tests/tracefact-rules.test.yml

clean:
	rm -rf $(VENV) $(E2E) $(INSTRUMENTORS_VENV) $(AGENTS_VENV) $(BENCH_VENV) $(LATEST_VENV) $(UV_HOME) dist $(DEMO_OUT) .pytest_cache .mypy_cache .ruff_cache .hypothesis
