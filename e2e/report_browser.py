"""`tracefact report`'s page as a person sees it, in a real browser with no network.

Playwright drives Debian's chromium (never a downloaded browser).

    python -m e2e.report_browser REPORT.html OUT.png

Opens the page from disk, fails if it asks for anything but itself (a script, a font or
a stylesheet from a CDN would show here), checks that every section and chart is drawn,
and saves a screenshot of the top of the page (the README shows it).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Page, Route, sync_playwright

from e2e.phoenix_browser import ARGS, CHROMIUM

VIEWPORT = {"width": 1000, "height": 1400}
SECTIONS = ("Hallucination rate", "Score distribution", "Worst cases", "Evaluator cost", "Coverage")


@contextmanager
def offline_page(report: str) -> Iterator[Page]:
    """The report opened from disk in Debian's chromium; fails if it asked for anything else."""
    page_url = Path(report).resolve().as_uri()
    asked: list[str] = []

    def only_the_page(route: Route) -> None:
        asked.append(route.request.url)
        if route.request.url == page_url:
            route.continue_()
        else:
            route.abort()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport=VIEWPORT)  # type: ignore[arg-type]
        page.route("**/*", only_the_page)
        page.goto(page_url)
        page.wait_for_load_state("networkidle")
        yield page
        browser.close()
    others = [url for url in asked if url != page_url]
    assert not others, f"the report asked the network for {others}"


def main(report: str, out: str) -> None:
    with offline_page(report) as page:
        text = page.inner_text("body")
        for section in SECTIONS:
            assert section in text, f"no {section!r} section"
        charts = page.locator("svg")
        assert charts.count() >= 3, f"{charts.count()} charts"  # rate, scores, statuses
        box = charts.first.bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 100, box
        assert page.locator("polyline").count() >= 2, "a rate line per group"
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=out)
    print(f"[report] drawn offline, {len(SECTIONS)} sections; saved {out}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
