# Two commands on a fresh machine: `make demo` and `make test`. Each sets up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# pip must never pick the compromised litellm releases, whatever asks for litellm.
export PIP_CONSTRAINT := $(CURDIR)/constraints.txt
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup setup-dev demo test lint bench clean e2e chaos test-instrumentors fixtures \
	prometheus-tools test-prometheus terminal-deps redis-server test-queues

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.runtime: $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.dev: $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install -q -e ".[dev]"
	touch $@ $(VENV)/.runtime

setup: $(VENV)/.runtime
setup-dev: $(VENV)/.dev

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

$(INSTRUMENTORS_VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(INSTRUMENTORS_VENV)
	$(INSTRUMENTORS_VENV)/bin/pip install -q -e ".[dev,instrumentors]"
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

# The fault-injection suite at length (make test runs a quick round of it).
chaos: setup-dev
	TRACEFACT_CHAOS_EXAMPLES=500 $(BIN)/pytest -q tests/pipeline/test_chaos.py

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

bench: setup-dev
	for script in benchmarks/*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

# End to end against real backends (Phoenix, MLflow) and a real browser (which also opens
# the demo's report with the network cut off and retakes its README picture), each installed
# in its own virtual environment under .e2e/, never in .venv; chromium comes from apt.
E2E := .e2e
E2E_ENVS := $(E2E)/phoenix/.installed $(E2E)/mlflow/.installed $(E2E)/browser/.installed

$(E2E)/%/.installed: e2e/requirements-%.txt
	rm -rf $(E2E)/$*
	$(PYTHON) -m venv $(E2E)/$*
	$(E2E)/$*/bin/pip install -q -r $<
	touch $@

# Prints how long a step took: $(call timed,what,command)
timed = @t=$$(date +%s); $(2) && echo "[e2e] $(1): $$(( $$(date +%s) - t ))s"

# The monitoring end to end runs the project's Python with the prometheus extra (and PyYAML).
$(VENV)/.e2e-prometheus: $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install -q -e ".[prometheus]" "pyyaml>=6"
	touch $@

# The collector check runs the OpenInference demo app and the collector from the
# instrumentors' environment (openai, the OpenInference instrumentor, the collector extra).
e2e: setup $(VENV)/.e2e-prometheus prometheus-tools $(INSTRUMENTORS_VENV)/.installed
	$(call timed,chromium from apt,command -v chromium >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		chromium fonts-liberation >/dev/null; })
	$(call timed,phoenix/mlflow/browser venvs,$(MAKE) --no-print-directory -j3 $(E2E_ENVS))
	$(BIN)/python -m e2e.phoenix_check
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
	rm -rf $(VENV) $(E2E) $(INSTRUMENTORS_VENV) $(DEMO_OUT) .pytest_cache .mypy_cache .ruff_cache .hypothesis
