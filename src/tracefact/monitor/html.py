"""A `Report` as one self-contained HTML page: inline CSS and SVG, nothing fetched.

The page is opened from disk, mailed, attached to an incident: it must show the same
with no network, so charts are drawn here as SVG rather than by a charting library.
Every text that came from a span is escaped.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from html import escape

from tracefact import semconv
from tracefact.monitor.estimator import Estimate
from tracefact.monitor.report import SCORE_BINS, Case, Cost, Point, Report, Series
from tracefact.review.html import section as review_section

COLOURS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777")
LABEL_COLOURS = {"factual": "#16a34a", "hallucinated": "#dc2626"}
STATUS_COLOURS = {
    semconv.STATUS_OK: "#16a34a",
    semconv.STATUS_SKIPPED: "#94a3b8",
    semconv.STATUS_SAMPLED_OUT: "#cbd5e1",
    semconv.STATUS_DROPPED: "#f59e0b",
    semconv.STATUS_TIMEOUT: "#ea580c",
    semconv.STATUS_ERROR: "#dc2626",
    semconv.STATUS_SHUTDOWN: "#7c3aed",
}
WIDTH, HEIGHT = 900, 260
LEFT, RIGHT, TOP, BOTTOM = 48, 16, 12, 28

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Liberation Sans",sans-serif;
 color:#0f172a;margin:0;background:#f8fafc}
main{max-width:960px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;
 border-bottom:1px solid #e2e8f0;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}
.meta{color:#475569;font-size:13px}
table{border-collapse:collapse;width:100%;background:#fff;font-size:13px}
th,td{border:1px solid #e2e8f0;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f1f5f9}td.num{text-align:right;font-variant-numeric:tabular-nums}
svg{background:#fff;border:1px solid #e2e8f0;max-width:100%;height:auto}
svg text{font:11px system-ui,sans-serif;fill:#475569}
.legend span{display:inline-block;margin-right:14px;font-size:13px}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px}
.case{background:#fff;border:1px solid #e2e8f0;border-left:4px solid #dc2626;
 padding:8px 12px;margin:10px 0}
.case .why{color:#7f1d1d}.case blockquote{margin:4px 0;padding-left:8px;
 border-left:2px solid #cbd5e1;color:#334155;white-space:pre-wrap}
.warn{background:#fef3c7;border:1px solid #f59e0b;padding:8px 12px}
.note{color:#475569;font-size:13px}
"""


def render(report: Report) -> str:
    """The whole page."""
    sections = [
        _header(report),
        _rates(report),
        _scores(report),
        _worst(report.worst),
        _costs(report.costs),
        _coverage(report),
    ]
    if report.review is not None:
        sections.insert(2, review_section(report.review))
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        f"<title>tracefact report: {escape(report.source)}</title>"
        f"<style>{CSS}</style></head><body><main>{''.join(sections)}</main></body></html>\n"
    )


def _header(report: Report) -> str:
    span = "no evaluated spans"
    if report.start is not None and report.end is not None:
        span = f"{_clock(report.start, full=True)} to {_clock(report.end, full=True)} UTC"
    parts = [
        "<h1>Hallucination report</h1>",
        f"<p class=meta>{escape(report.source)} · {report.spans} spans on "
        f"{report.lines} lines · {span} · grouped by "
        f"{escape(', '.join(report.group_by) or 'nothing')}</p>",
    ]
    if report.bad_count:
        shown = "".join(
            f"<li>line {bad.number}: {escape(bad.reason)}</li>" for bad in report.bad_lines
        )
        more = report.bad_count - len(report.bad_lines)
        tail = f"<li>… and {more} more</li>" if more > 0 else ""
        parts.append(
            f"<div class=warn>{report.bad_count} lines were not OTLP/JSON export requests "
            f"and were left out:<ul>{shown}{tail}</ul></div>"
        )
    return "".join(parts)


MIN_CHART_JUDGED = 10
"""Judged spans an evaluator needs before its rate over time is drawn."""


def _rates(report: Report) -> str:
    parts = [
        "<h2>Hallucination rate</h2>",
        "<p class=note>Each judged span counts with weight 1 / its sample rate, so the rate "
        "is that of all traffic, not of the sample; 95% intervals. Spans sampled but not "
        "judged (dropped, timeout, error, shutdown) are left out of the rate and lower its "
        "coverage.</p>",
    ]
    rows = [*(("all", e) for e in report.overall), *(("", e) for e in report.by_group)]
    if not rows:
        return "".join(parts) + "<p>No judged spans in this file.</p>"
    parts.append(
        "<table><tr><th>evaluator</th><th>group</th><th>rate</th><th>95% interval</th>"
        "<th>judged</th><th>n<sub>eff</sub></th><th>coverage</th><th>not judged</th></tr>"
    )
    parts.extend(_estimate_row(scope, estimate) for scope, estimate in rows)
    parts.append("</table>")
    by_evaluator: dict[str, list[Series]] = {}
    for series in report.series:
        by_evaluator.setdefault(series.evaluator, []).append(series)
    for evaluator, series_list in by_evaluator.items():
        parts.append(
            f"<h3>{escape(evaluator)}: rate over time "
            f"(sliding {_duration(report.window_seconds)} window)</h3>"
        )
        judged = sum(e.totals.judged for e in report.overall if e.evaluator == evaluator)
        if judged < MIN_CHART_JUDGED:  # a few points make a flat or empty line
            parts.append(
                f"<p>Too few judged spans over time for a chart ({judged}); the rates are in "
                "the table above.</p>"
            )
            continue
        parts.append(_legend([_group_text(s.group) for s in series_list]))
        parts.append(_rate_chart(series_list, report))
    return "".join(parts)


def _estimate_row(scope: str, estimate: Estimate) -> str:
    rate, band = "–", "–"
    if estimate.rate is not None:
        rate, band = (
            _percent(estimate.rate),
            f"{_percent(estimate.lower)} – {_percent(estimate.upper)}",
        )
    coverage = estimate.coverage
    unjudged = ", ".join(f"{k} {v}" for k, v in sorted(estimate.totals.unjudged.items()))
    return (
        f"<tr><td>{escape(estimate.evaluator)}</td>"
        f"<td>{escape(scope or _group_text(estimate.group))}</td>"
        f"<td class=num>{rate}</td><td class=num>{band}</td>"
        f"<td class=num>{estimate.totals.judged}</td><td class=num>{estimate.n_eff:.1f}</td>"
        f"<td class=num>{'–' if coverage is None else _percent(coverage)}</td>"
        f"<td>{escape(unjudged)}</td></tr>"
    )


def _rate_chart(series_list: Sequence[Series], report: Report) -> str:
    start = report.start if report.start is not None else 0.0
    end = report.end if report.end is not None else start + 1.0
    end = max(end, start + 1e-3)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(t: float) -> float:
        return LEFT + (t - start) / (end - start) * plot_w

    def y(rate: float) -> float:
        return TOP + (1.0 - rate) * plot_h

    parts = [_svg_open(f"hallucination rate over time by {', '.join(report.group_by)}")]
    parts.append(_y_axis(plot_w, plot_h, [0.0, 0.25, 0.5, 0.75, 1.0], _percent))
    shown: set[str] = set()
    for i, anchor in enumerate(("start", "middle", "middle", "middle", "end")):
        t = start + (end - start) * i / 4
        text = _clock(t, span=end - start)
        if text in shown:  # a short run: the clock does not move between ticks
            continue
        shown.add(text)
        parts.append(f'<text x="{x(t):.1f}" y="{HEIGHT - 8}" text-anchor="{anchor}">{text}</text>')
    for index, series in enumerate(series_list):
        colour = COLOURS[index % len(COLOURS)]
        for segment in _segments(series):
            upper = " ".join(f"{x(p.time):.1f},{y(p.upper):.1f}" for p in segment)
            lower = " ".join(f"{x(p.time):.1f},{y(p.lower):.1f}" for p in reversed(segment))
            parts.append(f'<polygon points="{upper} {lower}" fill="{colour}" opacity="0.15"/>')
            line = " ".join(f"{x(p.time):.1f},{y(p.rate or 0.0):.1f}" for p in segment)
            parts.append(
                f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2"/>'
            )
            for p in segment:
                tip = (
                    f"{_group_text(series.group)} at {_clock(p.time, full=True)}: "
                    f"{_percent(p.rate or 0.0)} ({_percent(p.lower)} – {_percent(p.upper)}), "
                    f"n_eff {p.n_eff:.1f}"
                )
                parts.append(
                    f'<circle cx="{x(p.time):.1f}" cy="{y(p.rate or 0.0):.1f}" r="2.5" '
                    f'fill="{colour}"><title>{escape(tip)}</title></circle>'
                )
    parts.append("</svg>")
    return "".join(parts)


def _segments(series: Series) -> list[list[Point]]:
    """Runs of points that have a rate; a window with nothing judged breaks the line."""
    segments: list[list[Point]] = [[]]
    for point in series.points:
        if point.rate is None:
            if segments[-1]:
                segments.append([])
        else:
            segments[-1].append(point)
    return [s for s in segments if s]


def _scores(report: Report) -> str:
    parts = [
        "<h2>Score distribution</h2>",
        "<p class=note>Judged spans by score (0 = supported, 1 = hallucinated), coloured by "
        "the evaluator's label; counts of evaluated spans, not weighted.</p>",
    ]
    if not report.scores:
        return "".join(parts) + "<p>No scores in this file.</p>"
    for evaluator, by_label in report.scores.items():
        parts.append(f"<h3>{escape(evaluator)}</h3>")
        parts.append(_legend(list(by_label), colours=[_label_colour(k) for k in by_label]))
        parts.append(_histogram(by_label))
    return "".join(parts)


def _histogram(by_label: Mapping[str, Sequence[int]]) -> str:
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    totals = [sum(counts[i] for counts in by_label.values()) for i in range(SCORE_BINS)]
    top = max(totals, default=0) or 1
    bar_w = plot_w / SCORE_BINS
    parts = [_svg_open("score histogram")]
    ticks = sorted({round(top * f) for f in (0.0, 0.25, 0.5, 0.75, 1.0)})  # whole spans, once
    parts.append(_y_axis(plot_w, plot_h, [t / top for t in ticks], lambda v: f"{v * top:.0f}"))
    for i in range(0, SCORE_BINS + 1, SCORE_BINS // 4):
        parts.append(
            f'<text x="{LEFT + i * bar_w:.1f}" y="{HEIGHT - 8}" text-anchor="middle">'
            f"{i / SCORE_BINS:.2f}</text>"
        )
    for i in range(SCORE_BINS):
        base = 0
        for label, counts in by_label.items():
            if not counts[i]:
                continue
            height = counts[i] / top * plot_h
            y = TOP + plot_h - (base + counts[i]) / top * plot_h
            tip = f"{label}: {counts[i]} with score {i / SCORE_BINS:.2f}–{(i + 1) / SCORE_BINS:.2f}"
            parts.append(
                f'<rect x="{LEFT + i * bar_w + 1:.1f}" y="{y:.1f}" width="{bar_w - 2:.1f}" '
                f'height="{height:.1f}" fill="{_label_colour(label)}">'
                f"<title>{escape(tip)}</title></rect>"
            )
            base += counts[i]
    parts.append("</svg>")
    return "".join(parts)


def _worst(cases: Sequence[Case]) -> str:
    parts = [
        "<h2>Worst cases</h2>",
        "<p class=note>The answers judged hallucinated, highest scores first, with the "
        "evaluator's explanation and the claims it found unsupported; the same answer to the "
        "same question is shown once, with how many times it was judged.</p>",
    ]
    if not cases:
        return "".join(parts) + "<p>No answer in this file was judged hallucinated.</p>"
    for case in cases:
        unsupported = "".join(f"<li>{escape(claim)}</li>" for claim in case.unsupported)
        contexts = "".join(f"<blockquote>{escape(c)}</blockquote>" for c in case.contexts)
        parts.append(
            "<div class=case>"
            f"<b>{escape(case.label)}</b> · score {case.score:.2f} · {escape(case.evaluator)} · "
            f"{escape(_group_text(case.group))} · {_clock(case.time, full=True)} UTC · "
            f"trace <code>{case.trace_id}</code>"
            + (f" · <b>{case.repeats} times</b>" if case.repeats > 1 else "")
            + f"<div><b>Question</b><blockquote>{escape(case.question or '(not recorded)')}"
            f"</blockquote><b>Answer</b><blockquote>{escape(case.answer or '(not recorded)')}"
            f"</blockquote></div><p class=why><b>Why:</b> {escape(case.explanation)}</p>"
            + (f"<p><b>Unsupported</b></p><ul>{unsupported}</ul>" if unsupported else "")
            + (
                f"<details><summary>Contexts ({len(case.contexts)})</summary>{contexts}</details>"
                if contexts
                else ""
            )
            + "</div>"
        )
    return "".join(parts)


def _costs(costs: Sequence[Cost]) -> str:
    parts = [
        "<h2>Evaluator cost and latency</h2>",
        "<p class=note>Per evaluated span, all its evaluators together "
        "(<code>tracefact.eval.cost_usd</code>, <code>tracefact.eval.latency_ms</code>). "
        "Offline evaluators cost nothing; judges are priced when litellm knows the "
        "model.</p>",
    ]
    if not costs:
        return "".join(parts) + "<p>No evaluated spans in this file.</p>"
    parts.append(
        "<table><tr><th>group</th><th>evaluated</th><th>priced</th><th>total USD</th>"
        "<th>USD / evaluation</th><th>latency p50</th><th>p95</th><th>max</th></tr>"
    )
    for cost in costs:
        per = f"{cost.usd / cost.priced:.6f}" if cost.priced else "–"
        p50, p95, top = (cost.latency(q) for q in (0.5, 0.95, 1.0))
        parts.append(
            f"<tr><td>{escape(_group_text(cost.group))}</td>"
            f"<td class=num>{cost.evaluated}</td><td class=num>{cost.priced}</td>"
            f"<td class=num>{cost.usd:.6f}</td><td class=num>{per}</td>"
            f"<td class=num>{_ms(p50)}</td><td class=num>{_ms(p95)}</td>"
            f"<td class=num>{_ms(top)}</td></tr>"
        )
    parts.append("</table>")
    return "".join(parts)


def _coverage(report: Report) -> str:
    parts = [
        "<h2>Coverage</h2>",
        "<p class=note>Every LLM span by its final <code>tracefact.eval.status</code>: "
        "<code>ok</code> spans are judged; <code>sampled_out</code> ones were not chosen; "
        "<code>skipped</code> ones had nothing to judge; <code>(not evaluated)</code> ones "
        "never met tracefact's pipeline; the rest were chosen but not judged.</p>",
    ]
    total = sum(report.statuses.values())
    if not total:
        return "".join(parts) + "<p>No LLM spans in this file.</p>"
    parts.append(_status_bar(report.statuses, total))
    parts.append("<table><tr><th>status</th><th>spans</th><th>share</th></tr>")
    for status, count in report.statuses.most_common():
        parts.append(
            f'<tr><td><span class=swatch style="background:{_status_colour(status)}"></span>'
            f"{escape(status)}</td><td class=num>{count}</td>"
            f"<td class=num>{_percent(count / total)}</td></tr>"
        )
    parts.append("</table>")
    if report.skip_reasons:
        reasons = ", ".join(f"{k} {v}" for k, v in report.skip_reasons.most_common())
        parts.append(f"<p class=note>Skipped because: {escape(reasons)}.</p>")
    return "".join(parts)


def _status_bar(statuses: Mapping[str, int], total: int) -> str:
    parts = [f'<svg viewBox="0 0 {WIDTH} 28" width="{WIDTH}" role="img"><title>statuses</title>']
    x = 0.0
    for status, count in sorted(statuses.items(), key=lambda item: -item[1]):
        width = count / total * WIDTH
        parts.append(
            f'<rect x="{x:.1f}" y="0" width="{width:.1f}" height="28" '
            f'fill="{_status_colour(status)}"><title>{escape(status)}: {count}</title></rect>'
        )
        x += width
    parts.append("</svg>")
    return "".join(parts)


# --- small pieces ------------------------------------------------------------------


def _svg_open(title: str) -> str:
    return (
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" role="img">'
        f"<title>{escape(title)}</title>"
    )


def _y_axis(
    plot_w: float, plot_h: float, fractions: Sequence[float], label: Callable[[float], str]
) -> str:
    parts = []
    for fraction in fractions:
        y = TOP + (1.0 - fraction) * plot_h
        parts.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}" '
            'stroke="#e2e8f0"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{label(fraction)}</text>'
        )
    return "".join(parts)


def _legend(names: Sequence[str], colours: Sequence[str] | None = None) -> str:
    colours = colours or [COLOURS[i % len(COLOURS)] for i in range(len(names))]
    items = "".join(
        f'<span><span class=swatch style="background:{colour}"></span>{escape(name)}</span>'
        for name, colour in zip(names, colours, strict=True)
    )
    return f"<p class=legend>{items}</p>"


def _group_text(group: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in group.items()) or "all"


def _label_colour(label: str) -> str:
    return LABEL_COLOURS.get(label, "#64748b")


def _status_colour(status: str) -> str:
    return STATUS_COLOURS.get(status, "#64748b")


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f} ms"


def _duration(seconds: float) -> str:
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.3g} s"


def _clock(t: float, span: float = 0.0, full: bool = False) -> str:
    moment = dt.datetime.fromtimestamp(t, dt.timezone.utc)
    if full:
        return moment.strftime("%Y-%m-%d %H:%M:%S")
    return moment.strftime("%H:%M:%S.%f")[:-4] if span < 60 else moment.strftime("%H:%M:%S")
