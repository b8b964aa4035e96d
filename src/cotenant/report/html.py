"""A self-contained HTML report page: the settings, the result tables and the figures.

Values are written for a reader, never as Python reprs: a mapping becomes a list of
``key: value`` lines, a list a comma-separated line, a flag yes or no. A table longer than a
screen can be folded (``<details>``), the full data staying in the report's JSON.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class HtmlTable:
    """One result table: string cells, a caption under it (definitions, units), and whether
    it starts folded (a ``<details>`` whose summary is the title)."""

    headers: Sequence[str]
    rows: Sequence[Sequence[str]]
    title: str = ""
    caption: str = ""
    folded: bool = False


@dataclass(frozen=True)
class Figure:
    """An image of the report (by file name) and what a reader needs to read it."""

    name: str
    caption: str = ""


def value_html(value: object) -> str:
    """A setting's value as HTML a reader can take in: no Python reprs."""
    esc = html.escape
    if isinstance(value, Mapping):
        if not value:
            return "none"
        items = "".join(f"<li>{esc(str(k))}: {value_html(v)}</li>" for k, v in value.items())
        return f'<ul class="kv">{items}</ul>'
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return esc(f"{value:,g}" if math.isfinite(value) else "n/a")
    if isinstance(value, int):
        return esc(f"{value:,}")
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(value_html(v) for v in value) if value else "none"
    return esc("n/a" if value is None else str(value))


NUMBER = re.compile(r"[-+]?[\d,]*\.?\d+%?|n/a|-|")
"""A cell that reads as a figure: right-aligned, the rest (names, settings, steps) left."""


def table_html(table: HtmlTable) -> str:
    esc = html.escape
    columns = range(len(table.headers))
    numeric = [all(NUMBER.fullmatch(row[i].strip()) for row in table.rows) for i in columns]
    align = ["" if numeric[i] else ' class="t"' for i in columns]
    head = "".join(f"<th{align[i]}>{esc(h)}</th>" for i, h in enumerate(table.headers))
    body = "".join(
        "<tr>" + "".join(f"<td{align[i]}>{esc(c)}</td>" for i, c in enumerate(row)) + "</tr>"
        for row in table.rows
    )
    caption = f'<p class="caption">{esc(table.caption)}</p>' if table.caption else ""
    grid = (f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
            f"</table></div>{caption}")
    if table.folded:
        summary = f"{table.title} ({len(table.rows)} rows)" if table.title else "details"
        return f"<details><summary>{esc(summary)}</summary>{grid}</details>"
    title = f"<h3>{esc(table.title)}</h3>" if table.title else ""
    return title + grid


def render_report(
    title: str,
    settings: Mapping[str, object],
    tables: Sequence[HtmlTable],
    figures: Sequence[Figure] = (),
    notes: Sequence[str] = (),
) -> str:
    """The page: settings, results (tables, then notes), figures with their captions."""
    esc = html.escape
    setting_rows = "".join(
        f"<tr><th>{esc(str(k))}</th><td>{value_html(v)}</td></tr>" for k, v in settings.items()
    )
    results = "".join(table_html(t) for t in tables)
    note_items = "".join(f"<li>{esc(n)}</li>" for n in notes)
    note_list = f"<ul>{note_items}</ul>" if notes else ""
    images = "".join(
        f'<figure><img src="{esc(f.name)}" alt="{esc(f.caption or f.name)}">'
        + (f"<figcaption>{esc(f.caption)}</figcaption>" if f.caption else "")
        + "</figure>"
        for f in figures
    )
    plots = f"<h2>Figures</h2>{images}" if figures else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 90em; }}
table {{ border-collapse: collapse; margin: 0.5em 0; }}
th, td {{ border: 1px solid #ccc; padding: 4px 10px; text-align: right; }}
thead th {{ background: #f3f3f3; vertical-align: bottom; }}
th.t, td.t {{ text-align: left; }}
table.settings th {{ text-align: left; background: #f3f3f3; }}
table.settings td {{ text-align: left; }}
ul.kv {{ margin: 0; padding-left: 1.2em; }}
p.caption, figcaption {{ color: #555; font-size: 0.9em; max-width: 60em; }}
div.wide {{ overflow-x: auto; }}
details {{ margin: 1em 0; }}
summary {{ cursor: pointer; font-weight: 600; }}
figure {{ margin: 1.5em 0; }}
img {{ max-width: 100%; }}
</style></head><body>
<h1>{esc(title)}</h1>
<h2>Settings</h2><table class="settings">{setting_rows}</table>
<h2>Results</h2>{results}{note_list}
{plots}
</body></html>
"""
