"""The report's review section as a person sees it, in a real browser with no network.

    python -m e2e.review_browser REPORT.html OUT.png

Opens the page from disk, fails if it asks for anything but itself, and saves a picture
of the section "The evaluator against people" (docs/review.md shows it).
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import Route, sync_playwright

from e2e.phoenix_browser import ARGS, CHROMIUM

VIEWPORT = {"width": 1000, "height": 1400}


def main(report: str, out: str) -> None:
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
        section = page.locator("#review")
        assert section.count() == 1, "no review section"
        text = section.inner_text()
        for part in ("corrected rate", "sensitivity", "strata", "over time"):
            assert part in text, f"no {part!r} in the review section"
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        section.screenshot(path=out)
        browser.close()
    others = [url for url in asked if url != page_url]
    assert not others, f"the report asked the network for {others}"
    print(f"[review] section drawn offline; saved {out}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
