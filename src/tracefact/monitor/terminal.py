"""`tracefact monitor`'s live view: a `Snapshot` drawn with rich, refreshed until q or Ctrl-C.

Needs the ``monitor`` extra (rich). Keys are read in cbreak mode only when standard
input is a terminal, and the terminal is always put back as it was.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import select
import sys
import time
from collections.abc import Iterator
from typing import Any

from tracefact._imports import import_extra
from tracefact.monitor.sources import ReviewRow, Row, Snapshot, Source

BAND_WIDTH = 16
WIDE = 110
"""Columns a terminal needs for the band; narrower ones show the figures without it."""
QUIT_KEYS = frozenset("qQ")


def band(row: Row, width: int = BAND_WIDTH) -> str:
    """The interval as a bar over [0, 100%]: ``····[━━━●━━━]·······``."""
    if row.rate is None:
        return "·" * width

    def at(value: float) -> int:
        return min(width - 1, max(0, round(value * (width - 1))))

    low, high, mark = at(row.lower), at(row.upper), at(row.rate)
    cells = ["·"] * width
    for i in range(low, high + 1):
        cells[i] = "━"
    cells[low], cells[high] = "[", "]"
    cells[mark] = "●"
    return "".join(cells)


def view(snapshot: Snapshot, interval: float, live: bool = True, width: int = WIDE) -> Any:
    """The whole screen for one snapshot (a rich renderable), for `width` columns."""
    rich_table = import_extra("rich.table", "monitor")
    rich_console = import_extra("rich.console", "monitor")
    rich_text = import_extra("rich.text", "monitor")
    rich_box = import_extra("rich.box", "monitor")
    taken = dt.datetime.fromtimestamp(snapshot.taken or time.time(), dt.timezone.utc)
    title = rich_text.Text.assemble(
        ("tracefact monitor", "bold"),
        f"  {snapshot.source}  ·  {taken:%H:%M:%S} UTC",
        f", every {interval:g}s  ·  q to quit" if live else "",
    )
    parts: list[Any] = [title]
    by_evaluator: dict[str, list[Row]] = {}
    for row in snapshot.rows:
        by_evaluator.setdefault(row.evaluator, []).append(row)
    for evaluator, rows in by_evaluator.items():
        parts.append(_rate_table(rich_table, rich_box, evaluator, rows, band_too=width >= WIDE))
    if not snapshot.rows:
        parts.append(rich_text.Text("nothing judged in the window yet", style="dim"))
    parts.extend(rich_text.Text(line) for line in review_lines(snapshot.review))
    traffic = rich_table.Table.grid(padding=(0, 2))
    traffic.add_column(style="bold")
    traffic.add_column()
    traffic.add_row("throughput", _throughput(snapshot))
    queues = ", ".join(f"{k} {v:g}" for k, v in snapshot.queues.items()) or "–"
    traffic.add_row("queue depth", queues)
    statuses = ", ".join(f"{k} {v}" for k, v in snapshot.statuses.most_common()) or "–"
    traffic.add_row("LLM spans", statuses)
    drops = ", ".join(f"{k} {v:g}" for k, v in snapshot.drops.items()) or "–"
    traffic.add_row("drops", drops)
    parts.extend([rich_text.Text(""), traffic])
    parts.extend(rich_text.Text(note, style="yellow") for note in snapshot.notes)
    if snapshot.error:
        parts.append(rich_text.Text(f"cannot read the source: {snapshot.error}", style="bold red"))
    return rich_console.Group(*parts)


def _rate_table(
    rich_table: Any, rich_box: Any, evaluator: str, rows: list[Row], band_too: bool = True
) -> Any:
    """Rates by group; the band only where it fits, and the group folds before a rate goes."""
    table = rich_table.Table(
        title=f"evaluator {evaluator}",
        title_justify="left",
        box=rich_box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
    )
    table.add_column("group", overflow="fold")
    table.add_column("rate", justify="right", no_wrap=True)
    table.add_column("95% CI", justify="right", no_wrap=True)
    if band_too:
        table.add_column("0% ─ band ─ 100%", no_wrap=True)
    table.add_column("n_eff", justify="right", no_wrap=True)
    table.add_column("coverage", justify="right", no_wrap=True)
    for row in rows:
        interval = "–"
        if row.rate is not None:
            interval = f"{100 * row.lower:.1f}–{100 * row.upper:.1f}%"
        cells = [
            ", ".join(f"{k}={v}" for k, v in row.group.items()) or "all",
            _percent(row.rate),
            interval,
            *([band(row)] if band_too else []),
            "–" if row.n_eff is None else f"{row.n_eff:.1f}",
            _percent(row.coverage),
        ]
        table.add_row(*cells)
    return table


def run(source: Source, interval: float) -> int:
    """Refresh the view every `interval` seconds until q or Ctrl-C; 0 on a clean exit."""
    rich_live = import_extra("rich.live", "monitor")
    with (
        _keys() as pressed,
        rich_live.Live(auto_refresh=False, screen=True) as live,
    ):
        try:
            while True:
                live.update(view(source.poll(), interval, width=live.console.width), refresh=True)
                if pressed(interval):
                    break
        except KeyboardInterrupt:
            pass
    return 0


def print_once(source: Source, interval: float) -> int:
    """One snapshot printed (scripts, a quick look); 2 when the source could not be read."""
    rich_console = import_extra("rich.console", "monitor")
    snapshot = source.poll()
    console = rich_console.Console()
    console.print(view(snapshot, interval, live=False, width=console.width))
    return 2 if snapshot.error else 0


@contextlib.contextmanager
def _keys() -> Iterator[Any]:
    """A function that waits up to N seconds and says whether a quit key was pressed."""
    stream = sys.stdin
    if not stream.isatty():

        def sleep_only(seconds: float) -> bool:
            time.sleep(seconds)
            return False

        yield sleep_only
        return
    import termios
    import tty

    fd = stream.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)

    def quit_pressed(seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([fd], [], [], left)
            if ready and QUIT_KEYS & set(os.read(fd, 32).decode(errors="replace")):
                return True
        return False

    try:
        yield quit_pressed
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def review_lines(rows: list[ReviewRow]) -> list[str]:
    """The corrected rate (people's labels), a line per evaluator, under 80 columns."""
    out = []
    for row in rows:
        who = row.evaluator + (f" / {row.group}" if row.group else "")
        if row.shown and row.rate is not None:
            figure = f"{_percent(row.rate)} [{_percent(row.lower)}, {_percent(row.upper)}]"
        else:
            figure = "withheld (too few labels)"
        out.append(f"corrected by people: {who}"[:80])
        out.append(f"  {figure}  ·  labels {row.labels}  ·  pending {row.pending}"[:80])
    return out


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _throughput(snapshot: Snapshot) -> str:
    if not snapshot.throughput:
        return "– (after the next refresh)"
    return ", ".join(f"{value:.1f} {name}/s" for name, value in snapshot.throughput.items())
