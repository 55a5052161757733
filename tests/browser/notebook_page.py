"""A JupyterLab page showing one notebook: write it, open it, run it, read its kernel.

``NotebookPage`` is what the ``nb`` fixture gives a test (see ``conftest.py``).
Every wait here is on a state the app reports (the kernel really idle, a cell
finished, a selector visible, a kernel value), never a fixed sleep.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab import Lab, write_notebook

ARTIFACTS = Path(__file__).parent / "_artifacts"
WAIT_MS = 60_000

Cells = Sequence[str | tuple[str, str]]

# The kernel is really idle (not the execution indicator's early "idle", which
# reads idle while the kernel still initialises: Run All would then run nothing).
KERNEL_READY = """() => {
  const k = window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel;
  return !!k && k.connectionStatus === 'connected' && k.status === 'idle';
}"""

RUN_ALL = """async (ms) => {
  const app = window.jupyterapp;
  const timeout = new Promise((_, reject) =>
    setTimeout(() => reject(new Error(`Run All did not finish in ${ms} ms`)), ms));
  await Promise.race([app.commands.execute('notebook:run-all-cells'), timeout]);
}"""

RUN_CODE = """async ([code, ms]) => {
  const app = window.jupyterapp, nb = app.shell.currentWidget.content;
  nb.activeCellIndex = nb.widgets.length - 1;
  await app.commands.execute('notebook:insert-cell-below');
  nb.activeCell.model.sharedModel.setSource(code);
  const index = nb.activeCellIndex;
  const timeout = new Promise((_, reject) =>
    setTimeout(() => reject(new Error(`cell did not finish in ${ms} ms`)), ms));
  await Promise.race([app.commands.execute('notebook:run-cell'), timeout]);
  return index;
}"""

# "In [n]: Name: value" for every error output in the open notebook.
CELL_ERRORS = """() => {
  const nb = window.jupyterapp.shell.currentWidget.content, errors = [];
  nb.widgets.forEach((cell, i) => {
    const outputs = cell.model.outputs;
    for (let j = 0; outputs && j < outputs.length; j++) {
      const o = outputs.get(j).toJSON();
      if (o.output_type === 'error') errors.push(`cell ${i}: ${o.ename}: ${o.evalue}`);
    }
  });
  return errors;
}"""


def screenshot(page: Any, name: str) -> Path:
    """Save a screenshot as tests/browser/_artifacts/<name>.png and return its path."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


@dataclass
class NotebookPage:
    """One test's page in the session's JupyterLab, and the notebook it opened."""

    page: Any
    lab: Lab
    path: str | None = None
    opened: list[str] = field(default_factory=list)

    # ------------------------------------------------------------ the notebook

    def run(
        self,
        name: str,
        cells: Cells,
        *,
        ready: str | None = None,
        timeout_ms: int = WAIT_MS,
        allow_errors: bool = False,
    ) -> Any:
        """Write ``name`` with ``cells``, open it, run every cell, and wait for the view.

        ``ready`` is a selector that matches only once the widgets rendered their
        data (a class the view's JS sets, a ``data-`` attribute it fills); the
        call waits until it is visible and returns its locator (else None). A cell
        that raised fails the test here, with its error, unless ``allow_errors``.
        """
        self.write(name, cells)
        self.open(name)
        self.run_all(timeout_ms, allow_errors=allow_errors)
        if ready is None:
            return None
        view = self.page.locator(ready).first
        view.wait_for(state="visible", timeout=timeout_ms)
        return self.page.locator(ready)

    def write(self, name: str, cells: Cells) -> Path:
        """Write a notebook into the server's root (see ``lab.write_notebook``)."""
        return write_notebook(self.lab.root, name, cells)

    def open(self, path: str) -> None:
        """Open ``path`` (relative to the server root); wait until its kernel is really idle."""
        self.path = path
        self.opened.append(path)
        self.page.goto(self.lab.url(path))
        self.page.wait_for_function(KERNEL_READY, timeout=WAIT_MS)

    def run_all(self, timeout_ms: int = WAIT_MS, *, allow_errors: bool = False) -> None:
        """Run every cell through the app and wait until they have all finished."""
        self.page.evaluate(RUN_ALL, timeout_ms)
        self.page.wait_for_function(KERNEL_READY, timeout=timeout_ms)
        if not allow_errors:
            self.assert_no_cell_errors()

    def run_code(self, code: str, timeout_ms: int = WAIT_MS) -> Any:
        """Append a cell with ``code``, run it, and return the locator of its output area."""
        index = self.page.evaluate(RUN_CODE, [code, timeout_ms])
        self.page.wait_for_function(KERNEL_READY, timeout=timeout_ms)
        return (
            self.page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-OutputArea-output")
        )

    def assert_no_cell_errors(self) -> None:
        errors = self.page.evaluate(CELL_ERRORS)
        if errors:
            raise AssertionError(f"{self.path}: a cell raised:\n" + "\n".join(errors))

    # ------------------------------------------------------------ the kernel

    def kernel_eval(self, expr: str, timeout: float = 30) -> str:
        """``repr``-like text of ``expr`` in this notebook's kernel, read out of band."""
        return self.lab.kernel_eval(expr, notebook=self.path, timeout=timeout)

    def wait_kernel(
        self, expr: str, until: str | Callable[[str], bool], timeout: float = 30
    ) -> str:
        """Poll ``expr`` in the kernel until it reads ``until`` (or ``until(value)`` holds).

        A click in the browser reaches the kernel asynchronously: read the new value
        through this, not ``kernel_eval`` at once. Returns the value read last.
        """
        ok = until if callable(until) else until.__eq__
        deadline = time.monotonic() + timeout
        value = self.kernel_eval(expr)
        while not ok(value):
            if time.monotonic() > deadline:
                wanted = "" if callable(until) else f", expected {until!r}"
                raise AssertionError(f"kernel value of {expr!r} stayed {value!r}{wanted}")
            time.sleep(0.1)
            value = self.kernel_eval(expr)
        return value

    # ------------------------------------------------------------ the page

    def screenshot(self, name: str) -> Path:
        """Save the page as tests/browser/_artifacts/<name>.png (open it to look)."""
        return screenshot(self.page, name)

    def close(self) -> None:
        """Shut down the kernels of the notebooks this page opened."""
        for path in dict.fromkeys(self.opened):
            self.lab.shut_down(path)
