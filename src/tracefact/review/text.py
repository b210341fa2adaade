"""The corrected rate in plain text, within 80 columns (`tracefact labels`, the monitor)."""

from __future__ import annotations

from typing import Any

from tracefact.review.estimate import Bounded
from tracefact.review.ledger import ReviewEstimate

WIDTH = 80


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _bounded(b: Bounded) -> str:
    if b.value is None:
        return "-"
    return f"{b.value:.0%} [{b.lower:.0%}, {b.upper:.0%}]"


def lines(estimate: ReviewEstimate) -> list[str]:
    """A few lines about one evaluator's corrected rate, none over `WIDTH` columns."""
    c = estimate.corrected
    who = estimate.evaluator + (f" / {estimate.group}" if estimate.group else "")
    out = [who[:WIDTH]]
    if c.shown:
        out.append(
            f"  corrected rate {_pct(c.rate)} [{_pct(c.lower)}, {_pct(c.upper)}]"
            f"   evaluator alone {_pct(c.evaluator_rate)}"
        )
    else:
        out.append(f"  corrected rate withheld   evaluator alone {_pct(c.evaluator_rate)}")
        out.extend(_wrap(f"why: {c.withheld}", "  "))
    response = "-" if c.response_rate is None else f"{c.response_rate:.0%}"
    out.append(f"  labels {c.labels}   pending {c.pending}   labelled of selected {response}")
    out.append(f"  sensitivity {_bounded(c.sensitivity)}   specificity {_bounded(c.specificity)}")
    agreement = estimate.agreement
    if agreement.spans:
        out.append(
            f"  reviewers agree on {_pct(agreement.rate)} of pairs "
            f"({agreement.spans} spans labelled twice or more)"
        )
    if estimate.unselected_labels:
        out.append(f"  {estimate.unselected_labels} labels on spans not selected (not used)")
    needed = {str(s): n for s, n in c.labels_needed.items() if n > 0}
    if needed:
        wanted = ", ".join(f"{s} +{n}" for s, n in sorted(needed.items()))
        out.extend(_wrap(f"for ±{c.target_half_width:.0%}: {wanted}", "  "))
    for note in c.notes:
        out.extend(_wrap(f"note: {note}", "  "))
    return out


def _wrap(text: str, indent: str) -> list[str]:
    words, out, line = text.split(), [], indent
    for word in words:
        if len(line) + len(word) + 1 > WIDTH and line.strip():
            out.append(line.rstrip())
            line = indent + "  "
        line += word + " "
    if line.strip():
        out.append(line.rstrip())
    return out


def as_json(estimate: ReviewEstimate) -> dict[str, Any]:
    """One evaluator's corrected rate as plain data (`tracefact labels --json`)."""
    c = estimate.corrected
    return {
        "evaluator": estimate.evaluator,
        "group": estimate.group,
        "window_end": estimate.window_end,
        "shown": c.shown,
        "withheld": c.withheld,
        "rate": c.rate if c.shown else None,
        "lower": c.lower if c.shown else None,
        "upper": c.upper if c.shown else None,
        "evaluator_rate": c.evaluator_rate,
        "labels": c.labels,
        "pending": c.pending,
        "response_rate": c.response_rate,
        "sensitivity": [c.sensitivity.value, c.sensitivity.lower, c.sensitivity.upper],
        "specificity": [c.specificity.value, c.specificity.lower, c.specificity.upper],
        "agreement": {"spans": estimate.agreement.spans, "rate": estimate.agreement.rate},
        "reviewer_error": [c.reviewer_error.value, c.reviewer_error.lower, c.reviewer_error.upper],
        "unselected_labels": estimate.unselected_labels,
        "labels_needed": {str(s): n for s, n in c.labels_needed.items()},
        "notes": list(c.notes),
        "strata": [
            {
                "stratum": str(s.stratum),
                "share": s.share,
                "rate": s.rate,
                "lower": s.lower,
                "upper": s.upper,
                "labels": s.labelled,
                "pending": s.pending,
                "response_rate": s.response_rate,
            }
            for s in c.strata
        ],
    }
