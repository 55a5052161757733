"""``nbviz report RUN``: a whole run as one HTML file to share, opening offline.

The report is the run's :class:`~nbviz.widgets.dashboard.Dashboard` saved with
:func:`nbviz.widgets.export.save_html`, under a plain-text summary of the run and
its findings: one file with the front-end and the data embedded, no CDN, no
server. The scrubber moves every view and clicks open what they open, on the
recorded data; the page lists what was sampled to keep it small.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nbviz.widgets.export import DEFAULT_MAX_BYTES, DEFAULT_MAX_STEPS, PageInfo

__all__ = ["write_report"]


def write_report(
    run: str | Path | Any,
    output: str | Path | None = None,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> PageInfo:
    """Write the report of ``run`` (a run directory or an open run) to ``output``.

    ``output`` defaults to ``RUN/report.html``. Returns what was written: the
    path, the size in bytes and the notes the page shows (what was sampled).
    """
    from nbviz.run import open_run
    from nbviz.summary_text import run_summary
    from nbviz.widgets.dashboard import Dashboard

    opened = None
    if isinstance(run, (str, Path)):
        opened = run = open_run(run)
    try:
        out = Path(output) if output is not None else Path(run.run_dir) / "report.html"
        dash = Dashboard(run, live=False)
        try:
            notes = [f"Dashboard: {note}" for note in dash.notes]
            return dash.save_html(
                out,
                title=f"nbviz report: {run.name}",
                summary=run_summary(run).replace(f"  ({run.path})", "", 1),
                notes=notes,
                max_steps=max_steps,
                max_bytes=max_bytes,
            )
        finally:
            dash.close()
    finally:
        if opened is not None:
            opened.close()
