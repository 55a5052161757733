"""Every notebook in notebooks/ executes top to bottom in a real kernel."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path: Path, tmp_path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.output_type == "error"
    ]
    assert not errors


REPO = Path(__file__).parent.parent
QUICKSTART = REPO / "notebooks" / "01-quickstart.ipynb"


def test_quickstart_opens_the_run_make_demo_writes(tmp_path: Path) -> None:
    """`make demo` records into notebooks/runs/demo; the quickstart, run from its own
    folder, opens that run instead of recording another one."""
    import nbviz
    from nbviz.demo import record_demo

    made = re.search(r"nbviz demo --out (\S+)", (REPO / "Makefile").read_text())
    assert made, "the Makefile's demo target names no --out"
    out = Path(made.group(1))
    assert out.parts[0] == "notebooks", f"make demo writes {out}, not beside the quickstart"
    folder = tmp_path / "notebooks"
    recorded = record_demo(folder / out.relative_to("notebooks"), epochs=1)  # a short run
    with nbviz.open_run(recorded) as run:
        last = int(run.scalars("train_loss").step.max())

    nb = nbformat.read(QUICKSTART, as_version=4)
    nb.cells = nb.cells[:2]  # the cell that opens the run
    shown = "print('last step', int(run.scalars('train_loss').step.max()))"
    nb.cells.append(nbformat.v4.new_code_cell(shown))
    NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    ).execute()
    printed = "".join(
        o.get("text", "") for c in nb.cells for o in c.get("outputs", []) if "text" in o
    )
    assert "recorded" not in printed  # it did not train again
    assert f"last step {last}" in printed  # the 1-epoch run, not an 8-epoch one
