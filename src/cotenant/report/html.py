"""A self-contained HTML report: the settings, the summary table and the plots beside it."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path


def write_report(
    directory: Path,
    title: str,
    settings: Mapping[str, object],
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    images: Sequence[Path],
    notes: Sequence[str] = (),
) -> Path:
    """Write ``index.html`` into ``directory`` (images are referenced by file name)."""
    esc = html.escape
    setting_rows = "".join(
        f"<tr><th>{esc(str(k))}</th><td>{esc(str(v))}</td></tr>" for k, v in settings.items()
    )
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    figures = "".join(
        f'<figure><img src="{esc(p.name)}" alt="{esc(p.stem)}"></figure>' for p in images
    )
    note_items = "".join(f"<li>{esc(n)}</li>" for n in notes)
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: 4px 10px; text-align: right; }}
th:first-child, td:first-child {{ text-align: left; }}
img {{ max-width: 100%; }}
</style></head><body>
<h1>{esc(title)}</h1>
<h2>Settings</h2><table>{setting_rows}</table>
<h2>Results</h2><table><tr>{head}</tr>{body}</table>
<ul>{note_items}</ul>
<h2>Plots</h2>{figures}
</body></html>
"""
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / "index.html"
    out.write_text(page, encoding="utf-8")
    return out
