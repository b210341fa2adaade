"""End to end with Prometheus and Alertmanager (Debian's packages, `make prometheus-tools`).

A demo process (`e2e.monitor_demo`) serves tracefact's metrics; Prometheus scrapes it
every second with the rules of collector/prometheus/ and sends alerts to Alertmanager,
which posts them to a webhook receiver here, all on 127.0.0.1. The rules run as shipped
except for their time scale: windows of 30 s instead of 10 and 5 minutes, `for` in
seconds instead of minutes, evaluated every second.

The check: no alert while the rate is low; the alert reaches the webhook, for the risky
route only, once its true rate steps up; every panel query of the Grafana dashboard
(collector/grafana/tracefact.json) returns data; the alert resolves when the rate is
back down.

Run by `make e2e` with the project's Python, from the repository root:
    python -m e2e.prometheus_check
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import yaml

from e2e.backend import ROOT, Stopwatch, eventually, free_port, running

RULES = ROOT / "collector" / "prometheus" / "tracefact-rules.yml"
DASHBOARD = ROOT / "collector" / "grafana" / "tracefact.json"
ALERT = "HallucinationRateHigh"
RISKY = {"route": "/refund", "model": "small-model", "service": "support-bot"}


class Webhook:
    """Alertmanager's webhook receiver: every notification, with when it arrived."""

    def __init__(self) -> None:
        self.received: list[tuple[float, dict[str, Any]]] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append((time.monotonic(), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/alerts"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def alerts(self, status: str) -> list[dict[str, Any]]:
        """Alerts of our rule in notifications of `status` (firing or resolved)."""
        return [
            alert
            for _, message in self.received
            for alert in message["alerts"]
            if alert["status"] == status and alert["labels"]["alertname"] == ALERT
        ]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def fast_rules(path: Path) -> None:
    """The shipped rules on a time scale of seconds."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        group["interval"] = "1s"
        for rule in group["rules"]:
            rule["expr"] = rule["expr"].replace("[10m]", "[30s]").replace("[5m]", "[30s]")
            if "for" in rule:
                rule["for"] = rule["for"].replace("m", "s")
    path.write_text(yaml.safe_dump(rules, sort_keys=False))


def configs(workdir: Path, demo_port: int, alertmanager_port: int, webhook: str) -> None:
    fast_rules(workdir / "rules.yml")
    prometheus = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": ["rules.yml"],
        "alerting": {
            "alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{alertmanager_port}"]}]}]
        },
        "scrape_configs": [
            {"job_name": "demo", "static_configs": [{"targets": [f"127.0.0.1:{demo_port}"]}]}
        ],
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(prometheus))
    shipped = yaml.safe_load((ROOT / "collector" / "prometheus" / "alertmanager.yml").read_text())
    shipped["route"].update(group_wait="1s", group_interval="2s")
    for receiver in shipped["receivers"]:
        for hook in receiver.get("webhook_configs", []):
            hook["url"] = webhook
    (workdir / "alertmanager.yml").write_text(yaml.safe_dump(shipped))


class Prometheus:
    def __init__(self, base_url: str) -> None:
        self.client = httpx.Client(base_url=base_url, timeout=10)

    def query(self, expr: str) -> list[dict[str, Any]]:
        answer = self.client.get("/api/v1/query", params={"query": expr}).json()
        assert answer["status"] == "success", (expr, answer)
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def firing(self) -> list[dict[str, str]]:
        alerts = self.query(f'ALERTS{{alertname="{ALERT}", alertstate="firing"}}')
        return [a["metric"] for a in alerts]


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, query) for every target, variables set to 'All'."""
    dashboard = json.loads(DASHBOARD.read_text())
    names = [v["name"] for v in dashboard["templating"]["list"]]
    queries = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for name in names:
                expr = expr.replace(f"${name}", ".*")
            queries.append((panel["title"], expr))
    return queries


def ready_low(prometheus: Prometheus) -> None:
    """Both routes recorded with enough evidence, the risky one's rate surely low."""
    n_eff = prometheus.query("tracefact:monitor_n_eff:10m >= 30")
    assert {s["metric"]["route"] for s in n_eff} == {"/refund", "/faq"}, n_eff
    upper = prometheus.query('tracefact:monitor_rate_upper:10m{route="/refund"}')
    assert upper and float(upper[0]["value"][1]) < 0.05, upper


def main() -> None:
    for tool in ("prometheus", "prometheus-alertmanager"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed: run `make prometheus-tools`")
    watch = Stopwatch("prometheus")
    webhook = Webhook()
    demo_port, prometheus_port, alertmanager_port = free_port(), free_port(), free_port()
    prometheus = Prometheus(f"http://127.0.0.1:{prometheus_port}")
    with tempfile.TemporaryDirectory(prefix="tracefact-prometheus-") as tmp, ExitStack() as stack:
        stack.callback(webhook.close)
        workdir = Path(tmp)
        control = workdir / "phase"
        control.write_text("low")
        configs(workdir, demo_port, alertmanager_port, webhook.url)
        with watch.stage("startup"):
            demo = [sys.executable, "-m", "e2e.monitor_demo", str(demo_port), str(control)]
            stack.enter_context(
                running(demo, {}, f"http://127.0.0.1:{demo_port}/metrics", workdir / "demo.log")
            )
            alertmanager = [
                "prometheus-alertmanager",
                f"--config.file={workdir / 'alertmanager.yml'}",
                f"--storage.path={workdir / 'alertmanager'}",
                f"--web.listen-address=127.0.0.1:{alertmanager_port}",
                "--cluster.listen-address=",
            ]
            stack.enter_context(
                running(
                    alertmanager,
                    {},
                    f"http://127.0.0.1:{alertmanager_port}/-/ready",
                    workdir / "alertmanager.log",
                )
            )
            server = [
                "prometheus",
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{prometheus_port}",
            ]
            stack.enter_context(
                running(
                    server,
                    {},
                    f"http://127.0.0.1:{prometheus_port}/-/ready",
                    workdir / "prometheus.log",
                )
            )
        with watch.stage("low rate: no alert"):
            eventually(lambda: ready_low(prometheus), timeout=90)
            time.sleep(10)  # longer than the alert's `for`: nothing may be pending to fire
            assert prometheus.firing() == [], prometheus.firing()
            assert webhook.alerts("firing") == [], webhook.received
        with watch.stage("rate steps up: alert at the webhook"):
            control.write_text("high")

            def fired() -> list[dict[str, Any]]:
                alerts = webhook.alerts("firing")
                assert alerts, "no firing alert at the webhook yet"
                return alerts

            alerts = eventually(fired, timeout=120)
            for alert in alerts:  # the risky route only: the rest stayed at 1%
                labels = alert["labels"]
                assert {k: labels.get(k) for k in RISKY} == RISKY, labels
                assert labels["evaluator"] == "hallucination", labels
            rate = prometheus.query('tracefact:monitor_rate:ratio10m{route="/refund"}')
            print(f"[prometheus] alert received; /refund rate {float(rate[0]['value'][1]):.1%}")
        with watch.stage("dashboard queries"):
            queries = dashboard_queries()
            for title, expr in queries:
                assert prometheus.query(expr), f"panel {title!r}: no data for {expr}"
            print(f"[prometheus] {len(queries)} dashboard queries returned data", flush=True)
        with watch.stage("rate back down: alert resolved"):
            control.write_text("low")

            def resolved() -> None:
                assert webhook.alerts("resolved"), "no resolved notification yet"

            eventually(resolved, timeout=180)
        with watch.stage("stop"):
            stack.close()
    watch.report()


if __name__ == "__main__":
    main()
