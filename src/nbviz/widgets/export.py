"""Saving views as one self-contained HTML page that works offline, with no kernel.

``save_html(widget, path)`` writes a page that holds everything it needs: each
view's bundled front-end, its state (binary arrays as base64), the browser-side
links between views (``ipywidgets.jslink``) and a small runtime
(``js/report_runtime.js``) that implements the anywidget model API over that
state. Nothing is fetched: no CDN, no server, no network.

What a live view asks the kernel for (the data at a new step, the samples of a
clicked confusion cell, a layer's detail) is recorded before writing: each view's
inputs are set, in Python, to a sampled set of values (at most ``max_steps``
steps, the first and last included, plus the steps findings and evaluations
point at), and every trait that changed is stored, each distinct value once. In
the page, a change of such an input plays back the recorded answer; a step that
was not sampled shows the nearest sampled step at or before it. The page says
what was sampled. The recorded answers stay within ``max_bytes`` (the bundles,
about 0.4 MB, come on top) and each view's recording within ``MAX_GROUP_SECONDS``:
past either, a view's remaining combinations are left out, and the page says which.

This module writes the page (the bundles, the state JSON, the HTML); the
recording of the answers is :mod:`nbviz.widgets.answers` (the recorder) and
:mod:`nbviz.widgets.answer_plans` (what each view is asked).
"""

from __future__ import annotations

import hashlib
import html
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ipywidgets as W

from nbviz._version import __version__
from nbviz.widgets.answer_plans import (
    MAX_GALLERY_PAGES,
    Recording,
    pinned_steps,
    positions,
    prepare_views,
    record_answers,
    sampled_steps,
)
from nbviz.widgets.answers import MAX_GROUP_SECONDS, Group, browser_links, widget_tree
from nbviz.widgets.frontend import esm

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_STEPS", "PageInfo", "offline_page", "save_html"]

DEFAULT_MAX_STEPS = 120
"""Steps recorded per view input (sampled evenly when the run has more)."""
DEFAULT_MAX_BYTES = 40_000_000
"""Size budget of a page; past it, remaining combinations are left out (and listed)."""

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="nbviz {version}">
<title>{title}</title>
<style>
body {{ margin: 0; padding: 16px 24px; background: #fff; color: #1f1f1f;
  font-family: system-ui, sans-serif; font-size: 13px; }}
.nbviz-report-header h1 {{ font-size: 18px; margin: 0 0 4px 0; }}
.nbviz-report-meta {{ color: #616161; margin: 0 0 6px 0; }}
.nbviz-report-summary {{ white-space: pre-wrap; font-family: monospace; font-size: 12px;
  background: #f5f5f5; padding: 6px 8px; border-radius: 4px; max-height: 16em; overflow: auto; }}
.nbviz-report-notes {{ margin: 4px 0 10px 0; padding-left: 1.2em; color: #424242; }}
.nbviz-report-status {{ position: sticky; top: 0; z-index: 10; background: #fff8e1;
  border-left: 4px solid #e65100; padding: 4px 8px; margin-bottom: 8px; }}
.nbviz-report-view {{ margin: 4px 0; }}
</style>
</head>
<body>
<header class="nbviz-report-header">
<h1>{title}</h1>
<p class="nbviz-report-meta">{meta}</p>
{summary}
<details class="nbviz-report-about"><summary>What this page holds</summary>
<ul class="nbviz-report-notes">{notes}</ul></details>
</header>
<div class="nbviz-report-status" id="nbviz-report-status" hidden></div>
<main id="nbviz-report-root"><noscript>This page needs JavaScript to show its views.</noscript>
<div class="nbviz-message">Loading the views...</div></main>
<script type="application/json" id="nbviz-report-data">{data}</script>
<script type="module">
const data = JSON.parse(document.getElementById("nbviz-report-data").textContent);
const host = document.getElementById("nbviz-report-root");
try {{
  const url = URL.createObjectURL(new Blob([data.runtime], {{ type: "text/javascript" }}));
  const runtime = await import(url);
  window.nbvizReport = await runtime.start(data, host,
    {{ status: document.getElementById("nbviz-report-status") }});
}} catch (err) {{
  console.error("nbviz report failed to start", err);
  host.textContent = "This page could not show its views: " + err;
}}
</script>
</body>
</html>
"""


def _json_in_html(obj: Any) -> str:
    """JSON safe inside a <script> element: no '<' (so no </script>), no U+2028/9."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _model_record(w: W.Widget, state: dict[str, int], assets: dict[str, str]) -> dict[str, Any]:
    raw = w.get_state()
    rec: dict[str, Any] = {
        "id": w.model_id,
        "cls": type(w).__name__,
        "name": str(raw.get("_model_name", "")),
        "module": str(raw.get("_model_module", "")),
        "esm": None,
        "css": None,
        "state": state,
    }
    for trait in ("_esm", "_css"):
        text = raw.get(trait)
        if isinstance(text, str) and text:
            h = hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]
            assets[h] = text
            rec[trait[1:]] = h
    if rec["esm"] is None and rec["module"] == "anywidget":
        rec["name"] = "UnsupportedModel"
    return rec


@dataclass
class PageInfo:
    """What a written page holds: its size and what was sampled or left out."""

    path: Path | None
    nbytes: int
    notes: list[str]
    views: list[str]
    seconds: float


def offline_page(
    root: W.Widget,
    *,
    title: str | None = None,
    summary: str = "",
    notes: list[str] | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> tuple[str, PageInfo]:
    """The HTML text of a self-contained page showing ``root``, and what it holds.

    Parameters
    ----------
    root
        Any nbviz view, a Dashboard, or an ipywidgets container of them.
    title
        Page title (default: the view's class name).
    summary
        Plain text shown above the views (escaped; e.g. a run summary).
    notes
        Extra lines for the page's "What this page holds" list.
    max_steps
        Most steps recorded for each view input (evenly sampled, first and last kept).
    max_bytes
        Size budget for the recorded answers.
    """
    if not isinstance(root, W.Widget):
        raise TypeError(f"save_html: expected an ipywidgets widget, got {type(root).__name__}")
    if max_steps < 2:
        raise ValueError(f"save_html: max_steps must be >= 2, got {max_steps}")
    t0 = time.perf_counter()
    runtime = esm("report_runtime").read_text(encoding="utf-8")
    tree = widget_tree(root)
    if prepare_views(tree):
        tree = widget_tree(root)
    all_steps = positions(tree)
    sampled = sampled_steps(all_steps, pinned_steps(tree), max_steps)
    got = record_answers(tree, sampled, max_bytes)
    _say_unreadable(tree, got)
    limits = (max_steps, max_bytes)
    page_notes = _page_notes(notes or [], tree, got, all_steps, sampled, limits)
    data = _page_data(root, tree, got, runtime)
    text = _PAGE.format(
        version=html.escape(__version__),
        title=html.escape(title or type(root).__name__),
        meta=html.escape(
            f"saved {time.strftime('%Y-%m-%d %H:%M')} with nbviz {__version__}; "
            "opens offline, no server needed"
        ),
        summary=(
            f'<pre class="nbviz-report-summary">{html.escape(summary)}</pre>' if summary else ""
        ),
        notes="".join(f"<li>{html.escape(n)}</li>" for n in page_notes),
        data=_json_in_html(data),
    )
    info = PageInfo(
        path=None,
        nbytes=len(text.encode("utf-8")),
        notes=page_notes,
        views=sorted({type(w).__name__ for w in tree.values() if hasattr(w, "_esm")}),
        seconds=time.perf_counter() - t0,
    )
    return text, info


def _page_notes(
    notes: list[str],
    tree: dict[str, W.Widget],
    got: Recording,
    all_steps: list[int],
    sampled: list[int],
    limits: tuple[int, int],
) -> list[str]:
    """The page's "What this page holds" list: what was sampled, left out, or needs a kernel.

    ``limits`` is ``(max_steps, max_bytes)``; each note comes once, in order.
    """
    max_steps, max_bytes = limits
    out = list(notes)
    if all_steps:
        if len(all_steps) > max_steps:
            out.append(
                f"Steps: {len(sampled):,} of {len(all_steps):,} recorded steps are stored "
                "(evenly spaced, plus the steps of findings and evaluations); between them "
                "the views show the nearest stored step at or before the scrubber."
            )
        else:
            out.append(f"Steps: all {len(all_steps):,} recorded steps are stored.")
    for g in got.groups:
        if g.unreadable:
            out.append(_unreadable_note(g))
        elif not g.complete:
            out.append(
                f"{g.label}: only part of its combinations ({len(g.entries):,}) fit the "
                f"size budget of {max_bytes / 1e6:.1f} MB or {MAX_GROUP_SECONDS:.0f} s; "
                "for the others the view keeps what it showed."
            )
        if type(g.owner).__name__ == "SampleGallery":
            out.append(
                f"SampleGallery: the first {MAX_GALLERY_PAGES} pages of each selection and "
                "every sort order of its first page are stored."
            )
    out.extend(got.notes)
    notices = {
        str(w.notice)
        for w in tree.values()
        if isinstance(getattr(w, "notice", None), str) and w.notice
    }
    out.extend(sorted(notices))
    return list(dict.fromkeys(out))


def _unreadable_note(group: Group) -> str:
    """The line a page shows for a view whose answers stopped at a damaged table."""
    return (
        f"Not shown: {group.label} past what could be read ({len(group.entries):,} "
        f"combinations kept; for the others the view keeps what it showed): {group.unreadable}"
    )


def _say_unreadable(tree: dict[str, W.Widget], got: Recording) -> None:
    """A Dashboard in the page lists the unreadable answers with the views it leaves out."""
    lines = [_unreadable_note(g) for g in got.groups if g.unreadable]
    if not lines:
        return
    for mid, w in tree.items():
        if type(w).__name__ == "Dashboard" and "pending" in got.state.get(mid, {}):
            said = str(getattr(w, "pending", "") or "")
            got.state[mid]["pending"] = got.pool.add("\n".join([*filter(None, [said]), *lines]))


def _page_data(
    root: W.Widget, tree: dict[str, W.Widget], got: Recording, runtime: str
) -> dict[str, Any]:
    """The page's state JSON: bundles, stored values, each widget's state, links, answers."""
    assets: dict[str, str] = {}
    models = [_model_record(w, got.state[mid], assets) for mid, w in tree.items()]
    for rec in models:
        rec["live_only"] = got.live_only.get(rec["id"], [])
    return {
        "version": 1,
        "root": root.model_id,
        "runtime": runtime,
        "assets": assets,
        "buffers": got.pool.buffers,
        "values": [json.loads(v) for v in got.pool.values],
        "models": models,
        "links": browser_links(tree),
        "groups": [
            {
                "owner": g.owner.model_id,
                "label": g.label,
                "inputs": g.inputs,
                "loose": g.loose,
                "steps": g.steps,
                "outputs": [list(p) for p in g.outputs],
                "entries": [{"key": k, "out": [o[p] for p in g.outputs]} for k, o in g.entries],
            }
            for g in got.groups
        ],
    }


def save_html(root: W.Widget, path: str | Path, **kwargs: Any) -> PageInfo:
    """Write ``root`` as one self-contained HTML file at ``path``; see :func:`offline_page`."""
    text, info = offline_page(root, **kwargs)
    out = Path(path)
    if out.is_dir():
        raise IsADirectoryError(
            f"save_html: {out} is a directory; give a file name like report.html"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    info.path = out
    return info
