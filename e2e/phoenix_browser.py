"""A person's look at one evaluated trace in Phoenix, in a real browser.

Playwright drives Debian's chromium (never a downloaded browser).

    python e2e/phoenix_browser.py TRACE_URL LABEL EXPLANATION OUT.png

Opens the trace view with the LLM span selected, expands its annotations, opens the
hallucination annotation's details, checks that the label and explanation are on the
page, and saves a screenshot of the trace panel.
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
# Headless, and nothing reaching out: no QUIC, no first-run, sync or component updates.
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Wide enough that the span panel shows the explanation on a few lines, uncut.
VIEWPORT = {"width": 1600, "height": 800}
TIMEOUT_MS = 60_000


def open_annotation(page: Page, url: str) -> str:
    """The text of the annotation details shown for the selected span."""
    page.goto(url)
    span_panel = page.get_by_test_id("span-info-wrap")
    card = span_panel.locator("section.card", has=page.locator("h3", has_text="Annotations"))
    card.wait_for(timeout=TIMEOUT_MS)
    views = card.get_by_text("Table", exact=True)  # the List/Table switch of an open card
    if not views.is_visible():  # the card starts collapsed
        card.locator(".card__collapsible-header").click()
        views.wait_for(timeout=TIMEOUT_MS)
    details = card.get_by_role("button", name="View annotation details").filter(visible=True)
    details.first.click()
    popover = page.get_by_role("dialog").filter(has_text="hallucination").last
    popover.wait_for(timeout=TIMEOUT_MS)
    page.wait_for_timeout(500)  # let the popover finish its entrance
    return popover.inner_text()


def main(url: str, label: str, explanation: str, out: str) -> None:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport=VIEWPORT)  # type: ignore[arg-type]
        shown = open_annotation(page, url)
        assert label in shown, f"label {label!r} not shown: {shown!r}"
        assert " ".join(explanation.split()) in " ".join(shown.split()), shown
        trace_panel = page.get_by_role("dialog").filter(has_text="Trace").first
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=out, clip=trace_panel.bounding_box())
        browser.close()
    print(f"[phoenix] browser shows {label!r} with its explanation; saved {out}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])
