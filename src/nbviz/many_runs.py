"""Many runs at once: ``open_runs`` finds every run under a directory (or a glob).

The comparison views (``LossCurves``, ``RunsTable``) take a list of runs; a
sweep writes one run directory per configuration, often nested
(``runs/lr=0.1/seed=0``). ``open_runs("runs/")`` opens every directory under
``runs/`` that holds a ``run.sqlite``, read-only, in natural order of their
paths ("seed2" before "seed10").

A damaged run (a half-copied file, a file that is not a run, another schema
version) does not stop the others: by default it is skipped with a
:class:`~nbviz.store.RunFileWarning` naming each skipped path and why, and the
returned list's ``skipped`` maps those paths to the reason. ``strict=True``
refuses instead: the first damaged run's error is raised. Finding no run at
all is an error naming the pattern, as is finding only damaged ones.
"""

from __future__ import annotations

import glob
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from nbviz.run import RunView, open_run
from nbviz.store import DB_NAME, RunFileError
from nbviz.store.errors import warn_run_file

__all__ = ["RunList", "open_runs"]

_GLOB = re.compile(r"[*?\[]")


class RunList(list):
    """The runs ``open_runs`` opened (a plain list of read-only runs for the views),
    with ``skipped``: the damaged runs left out, path -> reason."""

    skipped: dict[Path, str]

    def __init__(self, runs: Iterable[RunView] = (), skipped: dict[Path, str] | None = None):
        super().__init__(runs)
        self.skipped = dict(skipped or {})

    @property
    def names(self) -> list[str]:
        """Each run's name, in order."""
        return [run.name for run in self]

    def close(self) -> None:
        """Close every run's connections."""
        for run in self:
            run.close()

    def __repr__(self) -> str:
        more = f", {len(self.skipped)} skipped" if self.skipped else ""
        names = ", ".join(self.names[:5]) + ("..." if len(self) > 5 else "")
        return f"<nbviz {len(self)} runs{more}: {names}>"


def _natural(path: Path) -> list[Any]:
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", str(path))]


def run_dirs(pattern: str | Path) -> list[Path]:
    """The run directories ``pattern`` names: a run directory itself, every run under a
    directory (at any depth), or every run a glob matches (or that lies under a match)."""
    text = str(pattern)
    if _GLOB.search(text):
        matches = [Path(m) for m in glob.glob(text, recursive=True)]
    else:
        matches = [Path(text)] if Path(text).exists() else []
    found: set[Path] = set()
    for match in matches:
        if match.is_file() and match.name == DB_NAME:
            found.add(match.parent)
        elif match.is_dir():
            if (match / DB_NAME).is_file():
                found.add(match)
            found.update(p.parent for p in match.rglob(DB_NAME) if p.is_file())
    return sorted(found, key=_natural)


def open_runs(pattern: str | Path, *, strict: bool = False) -> RunList:
    """Every run under a directory, or every run a glob matches, opened read-only.

    Parameters
    ----------
    pattern
        A directory (``"runs/"``: each run directory under it, at any depth), one
        run directory, or a glob (``"runs/lr=*"``, ``"runs/**/seed0"``).
    strict
        Refuse damaged runs (raise the first one's ``RunFileError``) instead of
        skipping them with a ``RunFileWarning`` that names them.

    Returns a :class:`RunList` (a list of runs, as ``LossCurves`` and
    ``RunsTable`` take) in natural order of the paths; ``.skipped`` holds the
    damaged runs left out and why.
    """
    if not isinstance(pattern, (str, Path)):
        raise TypeError(
            f"open_runs: pattern must be a directory or a glob (str or Path), "
            f"got {type(pattern).__name__} {pattern!r:.80}"
        )
    if str(pattern) == "":
        raise ValueError("open_runs: pattern is empty; pass a directory of runs or a glob")
    dirs = run_dirs(pattern)
    if not dirs:
        where = Path(pattern)
        if not _GLOB.search(str(pattern)) and not where.exists():
            why = "the path does not exist"
        elif _GLOB.search(str(pattern)):
            why = f"the glob matches no directory holding a {DB_NAME}"
        else:
            why = f"no directory under it holds a {DB_NAME}"
        raise FileNotFoundError(f"open_runs: no nbviz run found for {str(pattern)!r}: {why}")
    runs: list[RunView] = []
    skipped: dict[Path, str] = {}
    for path in dirs:
        try:
            run = open_run(path)
            run.meta("name")  # a first read: a damaged file fails here, not in a view
        except (RunFileError, OSError) as exc:
            if strict:
                raise
            skipped[path] = str(exc)
            continue
        runs.append(run)
    if skipped:
        lines = "\n".join(f"  {path}: {why}" for path, why in skipped.items())
        if not runs:
            raise RunFileError(
                Path(pattern),
                f"open_runs: every one of the {len(skipped)} runs found is damaged:\n{lines}",
            )
        warn_run_file(
            f"open_runs: skipped {len(skipped)} damaged run(s) of {len(dirs)} "
            f"(strict=True refuses them):\n{lines}"
        )
    return RunList(runs, skipped)
