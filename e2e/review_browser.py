"""The report's review section as a person sees it, in a real browser with no network.

    python -m e2e.review_browser REPORT.html OUT.png

Opens the page from disk, fails if it asks for anything but itself, and saves a picture
of the section "The evaluator against people" (docs/review.md shows it).
"""

from __future__ import annotations

import sys
from pathlib import Path

from e2e.report_browser import offline_page


def main(report: str, out: str) -> None:
    with offline_page(report) as page:
        section = page.locator("#review")
        assert section.count() == 1, "no review section"
        text = section.inner_text()
        for part in ("corrected rate", "sensitivity", "strata", "over time"):
            assert part in text, f"no {part!r} in the review section"
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        section.screenshot(path=out)
    print(f"[review] section drawn offline; saved {out}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
