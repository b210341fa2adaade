"""The review section of the report page: the corrected rate, the evaluator against people.

Drawn as tables (the page needs no network); every text from a span or a label is escaped.
"""

from __future__ import annotations

import datetime as dt
from html import escape

from tracefact.review.estimate import Bounded, Corrected
from tracefact.review.ledger import ReviewEstimate
from tracefact.review.report import ReviewReport


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _interval(lower: float, upper: float) -> str:
    return f"{_pct(lower)} – {_pct(upper)}"


def _bounded(b: Bounded) -> str:
    if b.value is None:
        return "–"
    return f"{_pct(b.value)} ({_interval(b.lower, b.upper)})"


def _when(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")


def section(review: ReviewReport) -> str:
    """The whole section."""
    parts = [
        "<section id=review><h2>The evaluator against people</h2>",
        "<p class=note>The corrected rate is the share of all traffic people would call "
        "hallucinated: the evaluator's verdicts, corrected with human labels on a random "
        "sample of the evaluated spans selected with known probabilities per stratum "
        "(group × verdict), weighted 1 / (sample rate × selection probability); 95% "
        "intervals (Wilson per stratum, combined by MOVER). It lags by the label delay; "
        "the evaluator's own rate stays the fast signal for change. A figure is withheld, "
        "with the reason, while a stratum holding 5% or more of the weight has too few "
        f"labels. Labels: {escape(review.labels_source)}; {review.selections} evaluated "
        f"spans carry a selection; {review.labels_read} labels read; window "
        f"{review.window_seconds / 86400:.3g} days by span end time.</p>",
    ]
    if not review.estimates:
        parts.append("<p>No evaluated span carries a review selection.</p></section>")
        return "".join(parts)
    parts.append(
        "<table><tr><th>evaluator</th><th>group</th><th>corrected rate</th><th>95% interval</th>"
        "<th>evaluator alone</th><th>sensitivity</th><th>specificity</th><th>labels</th>"
        "<th>pending</th></tr>"
    )
    parts.extend(_row(e) for e in review.estimates)
    parts.append("</table>")
    for estimate in review.estimates:
        parts.append(_strata(estimate))
    if review.over_time:
        parts.append(_over_time(review.over_time))
    parts.append("</section>")
    return "".join(parts)


def _row(e: ReviewEstimate) -> str:
    c = e.corrected
    if c.shown:
        rate, band = _pct(c.rate), _interval(c.lower, c.upper)
    else:
        rate, band = "withheld", escape(c.withheld or "")
    return (
        f"<tr><td>{escape(e.evaluator)}</td><td>{escape(e.group or 'all')}</td>"
        f"<td class=num>{rate}</td><td>{band}</td><td class=num>{_pct(c.evaluator_rate)}</td>"
        f"<td>{_bounded(c.sensitivity)}</td><td>{_bounded(c.specificity)}</td>"
        f"<td class=num>{c.labels}</td><td class=num>{c.pending}</td></tr>"
    )


def _strata(e: ReviewEstimate) -> str:
    c: Corrected = e.corrected
    title = escape(e.evaluator + (f" / {e.group}" if e.group else ""))
    rows = []
    for s in c.strata:
        response = "–" if s.response_rate is None else _pct(s.response_rate)
        more = c.labels_needed.get(s.stratum, 0)
        rows.append(
            f"<tr><td>{escape(str(s.stratum))}</td><td class=num>{_pct(s.share)}</td>"
            f"<td class=num>{_pct(s.rate) if s.labelled else '–'}</td>"
            f"<td>{_interval(s.lower, s.upper)}</td><td class=num>{s.labelled}</td>"
            f"<td class=num>{s.pending}</td><td class=num>{response}</td>"
            f"<td class=num>{more}</td></tr>"
        )
    notes = list(c.notes)
    if e.agreement.spans:
        notes.append(
            f"reviewers agree on {_pct(e.agreement.rate)} of pairs over the "
            f"{e.agreement.spans} spans labelled more than once"
        )
    if e.unselected_labels:
        notes.append(f"{e.unselected_labels} labels on spans not selected: kept, not used")
    return (
        f"<h3>{title}: strata</h3><table><tr><th>stratum</th><th>weight</th>"
        "<th>people's rate</th><th>95% interval</th><th>labels</th><th>pending</th>"
        f"<th>labelled of selected</th><th>more labels for ±{_pct(c.target_half_width)}</th>"
        f"</tr>{''.join(rows)}</table>" + "".join(f"<p class=note>{escape(n)}</p>" for n in notes)
    )


def _over_time(points: list[ReviewEstimate]) -> str:
    rows = []
    for e in points:
        c = e.corrected
        shown = c.shown
        rows.append(
            f"<tr><td>{_when(e.window_end)}</td><td>{escape(e.evaluator)}</td>"
            f"<td class=num>{_pct(c.rate) if shown else 'withheld'}</td>"
            f"<td>{_interval(c.lower, c.upper) if shown else ''}</td>"
            f"<td class=num>{_pct(c.evaluator_rate)}</td><td class=num>{c.labels}</td></tr>"
        )
    return (
        "<h3>The corrected rate over time (each over the window ending there)</h3>"
        "<table><tr><th>window end (UTC)</th><th>evaluator</th><th>corrected rate</th>"
        "<th>95% interval</th><th>evaluator alone</th><th>labels</th></tr>"
        f"{''.join(rows)}</table>"
    )
