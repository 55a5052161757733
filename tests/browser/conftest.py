"""Browser tests: a real JupyterLab server driven by headless Chromium through Playwright.

Fixtures
--------
``lab``            one JupyterLab server per session, in isolated temporary dirs
``browser``        one headless Chromium per session
``page``           a fresh page per test; console errors land in ``console_errors``
``nb``             the helpers below bound to this test's page and the server

A test writes its notebook into the server's root, opens it, runs it, and waits
for text the widget writes::

    def test_status_renders(nb):
        nb.write("status.ipynb", ["from nbviz.widgets.status import StatusMessage",
                                  "w = StatusMessage('hi'); w"])
        nb.open("status.ipynb")
        nb.run_all()
        expect(nb.page.locator(".nbviz-status")).to_have_text("hi")
        assert nb.kernel_eval("w.dismissed") == "False"

Chromium missing: the tests are skipped, except under ``CI=true``, where they fail.
On failure a screenshot is saved in ``tests/browser/_artifacts/``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest

HERE = Path(__file__).parent
REPO = HERE.parent.parent
ARTIFACTS = HERE / "_artifacts"
NOTEBOOK_DIR = REPO / "notebooks"
IN_CI = os.environ.get("CI", "").lower() == "true"
WAIT_MS = 60_000

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-sync",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-dev-shm-usage",
    "--use-angle=swiftshader",
    "--enable-unsafe-swiftshader",
]

# The kernel is really idle (not the execution indicator's early "idle").
KERNEL_READY = """() => {
  const k = window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel;
  return !!k && k.connectionStatus === 'connected' && k.status === 'idle';
}"""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/browser/ carries the ``browser`` marker."""
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.browser)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Keep each phase's report on the item so fixtures can see a failure."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"browser tests cannot run under CI=true: {reason}", pytrace=False)
    pytest.skip(reason)


def chromium_path() -> str | None:
    """Debian's chromium (``NBVIZ_CHROMIUM`` names another binary), or None when absent."""
    override = os.environ.get("NBVIZ_CHROMIUM")
    if override:
        return override if Path(override).is_file() else None
    found = shutil.which("chromium")
    if found:
        return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None


# ---------------------------------------------------------------- notebooks


def write_notebook(root: Path, name: str, cells: Sequence[str | tuple[str, str]]) -> Path:
    """Write ``root/name`` with one code cell per string (``("markdown", text)`` for prose)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    for cell in cells:
        if isinstance(cell, tuple):
            kind, source = cell
            make = (
                nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
            )
            nb.cells.append(make(source))
        else:
            nb.cells.append(nbformat.v4.new_code_cell(cell))
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


# ---------------------------------------------------------------- server


@dataclass
class Lab:
    """A running JupyterLab server."""

    base: str
    token: str
    root: Path
    runtime_dir: Path
    log: Path

    def url(self, path: str) -> str:
        return f"{self.base}/lab/tree/{path}?token={self.token}&reset"

    def api(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.base}/api/{path}?token={self.token}", timeout=10) as r:
            return json.load(r)

    def kernel_eval(self, expr: str, notebook: str | None = None, timeout: float = 30) -> str:
        """Evaluate ``expr`` in a notebook's kernel, out of band; returns its ``text/plain``.

        ``notebook`` is the notebook's path in the server root; it may be left out
        while only one session is open. A silent execution: the notebook is unchanged.
        """
        return kernel_eval(self, expr, notebook=notebook, timeout=timeout)


_CLIENTS: dict[str, Any] = {}


def kernel_eval(lab: Lab, expr: str, notebook: str | None = None, timeout: float = 30) -> str:
    """See ``Lab.kernel_eval``."""
    from jupyter_client import BlockingKernelClient

    sessions = lab.api("sessions")
    if notebook is not None:
        sessions = [s for s in sessions if s.get("path") == notebook]
    if len(sessions) != 1:
        paths = [s.get("path") for s in lab.api("sessions")]
        raise AssertionError(
            f"kernel_eval: need exactly one session for notebook={notebook!r}, open: {paths}"
        )
    kid = sessions[0]["kernel"]["id"]
    # one client per kernel, reused: a client per call (tests poll) runs out of file descriptors
    kc = _CLIENTS.get(kid)
    if kc is None:
        for old in _CLIENTS.values():  # earlier tests' kernels are gone
            old.stop_channels()
        _CLIENTS.clear()
        kc = BlockingKernelClient(connection_file=str(lab.runtime_dir / f"kernel-{kid}.json"))
        kc.load_connection_file()
        kc.start_channels()
        _CLIENTS[kid] = kc
    reply = kc.execute_interactive("", silent=True, user_expressions={"v": expr}, timeout=timeout)
    result = reply["content"]["user_expressions"]["v"]
    if result.get("status") != "ok":
        raise AssertionError(
            f"kernel_eval({expr!r}) raised {result.get('ename')}: {result.get('evalue')}"
        )
    return result["data"]["text/plain"]


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """One JupyterLab server for the session, in isolated dirs, serving a temporary root.

    The root starts as a copy of notebooks/ (Lab autosaves; the repo's files stay clean);
    tests add their own notebooks with ``write_notebook``.
    """
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "nb"
    if NOTEBOOK_DIR.is_dir():
        shutil.copytree(NOTEBOOK_DIR, root, ignore=shutil.ignore_patterns(".*"))
    root.mkdir(exist_ok=True)
    token = secrets.token_hex(16)
    runtime = tmp / "rt"
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=f"{tmp}/cfg",
        JUPYTER_RUNTIME_DIR=str(runtime),
        JUPYTERLAB_SETTINGS_DIR=f"{tmp}/set",
        JUPYTERLAB_WORKSPACES_DIR=f"{tmp}/ws",
        IPYTHONDIR=f"{tmp}/ipy",
        # the kernel imports this checkout's nbviz, whatever is installed
        PYTHONPATH=os.pathsep.join(
            p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH", "")) if p
        ),
    )
    settings = tmp / "set/@jupyterlab/apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}'
    )
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    log = tmp / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                "timeout",
                "900",
                sys.executable,
                "-m",
                "jupyter",
                "lab",
                "--no-browser",
                "--allow-root",
                "--ip=127.0.0.1",
                f"--port={port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={root}",
                "--LabApp.expose_app_in_browser=True",
            ],
            env=env,
            start_new_session=True,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    server = Lab(base=base, token=token, root=root, runtime_dir=runtime, log=log)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited with {proc.returncode}:\n{log.read_text()}")
            try:
                server.api("status")
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not answer within 60 s:\n{log.read_text()}")
                time.sleep(0.2)
        yield server
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # only the group this fixture started
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


# ---------------------------------------------------------------- browser


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Debian Chromium through Playwright (never `playwright install`)."""
    exe = chromium_path()
    if exe is None:
        _unavailable("chromium is not installed (apt-get install chromium, or set NBVIZ_CHROMIUM)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def console_errors() -> list[str]:
    """Console errors and uncaught exceptions of this test's page."""
    return []


@pytest.fixture
def page(request: pytest.FixtureRequest, browser: Any, console_errors: list[str]) -> Iterator[Any]:
    """A fresh page; screenshot in tests/browser/_artifacts/ when the test fails."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(WAIT_MS)
    pg.on(
        "console",
        lambda msg: (
            console_errors.append(f"console.{msg.type}: {msg.text}")
            if msg.type == "error"
            else None
        ),
    )
    pg.on("pageerror", lambda exc: console_errors.append(f"pageerror: {exc}"))
    try:
        yield pg
    finally:
        rep = getattr(request.node, "rep_call", None)
        if rep is not None and rep.failed:
            ARTIFACTS.mkdir(exist_ok=True)
            try:
                pg.screenshot(path=str(ARTIFACTS / f"{request.node.name}-failed.png"))
            except Exception as exc:  # the page may be gone; the failure itself matters more
                print(f"could not save a failure screenshot: {exc}")
        context.close()


# ---------------------------------------------------------------- driving the notebook


def open_notebook(page: Any, lab: Lab, path: str) -> None:
    """Open ``path`` (relative to the server root) and wait until its kernel is really idle."""
    page.goto(lab.url(path))
    page.wait_for_function(KERNEL_READY, timeout=WAIT_MS)


def run_all(page: Any, timeout_ms: int = WAIT_MS) -> None:
    """Run every cell through the app and wait until they have all finished."""
    page.evaluate(
        """async (ms) => {
          const app = window.jupyterapp;
          const timeout = new Promise((_, reject) =>
            setTimeout(() => reject(new Error(`Run All did not finish in ${ms} ms`)), ms));
          await Promise.race([app.commands.execute('notebook:run-all-cells'), timeout]);
        }""",
        timeout_ms,
    )
    page.wait_for_function(KERNEL_READY, timeout=timeout_ms)


def run_code(page: Any, code: str, timeout_ms: int = WAIT_MS) -> Any:
    """Append a cell with ``code``, run it, and return the locator of its output area."""
    index = page.evaluate(
        """async ([code, ms]) => {
          const app = window.jupyterapp, nb = app.shell.currentWidget.content;
          nb.activeCellIndex = nb.widgets.length - 1;
          await app.commands.execute('notebook:insert-cell-below');
          nb.activeCell.model.sharedModel.setSource(code);
          const index = nb.activeCellIndex;
          const timeout = new Promise((_, reject) =>
            setTimeout(() => reject(new Error(`cell did not finish in ${ms} ms`)), ms));
          await Promise.race([app.commands.execute('notebook:run-cell'), timeout]);
          return index;
        }""",
        [code, timeout_ms],
    )
    page.wait_for_function(KERNEL_READY, timeout=timeout_ms)
    return page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-OutputArea-output")


def screenshot(page: Any, name: str) -> Path:
    """Save a screenshot as tests/browser/_artifacts/<name>.png and return its path."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


@dataclass
class Notebook:
    """The helpers above, bound to one test's page and the session's server."""

    page: Any
    lab: Lab
    console_errors: list[str]
    path: str | None = None

    def write(self, name: str, cells: Sequence[str | tuple[str, str]]) -> Path:
        return write_notebook(self.lab.root, name, cells)

    def open(self, path: str) -> None:
        self.path = path
        open_notebook(self.page, self.lab, path)

    def run_all(self, timeout_ms: int = WAIT_MS) -> None:
        run_all(self.page, timeout_ms)

    def run_code(self, code: str, timeout_ms: int = WAIT_MS) -> Any:
        return run_code(self.page, code, timeout_ms)

    def kernel_eval(self, expr: str, timeout: float = 30) -> str:
        return kernel_eval(self.lab, expr, notebook=self.path, timeout=timeout)

    def screenshot(self, name: str) -> Path:
        return screenshot(self.page, name)


@pytest.fixture
def nb(page: Any, lab: Lab, console_errors: list[str]) -> Iterator[Notebook]:
    """Helpers bound to this test: write, open, run_all, run_code, kernel_eval, screenshot.

    The notebook's kernel is shut down afterwards, so each test starts from its own.
    """
    helper = Notebook(page=page, lab=lab, console_errors=console_errors)
    yield helper
    if helper.path is not None:
        for s in lab.api("sessions"):
            if s.get("path") == helper.path:
                req = urllib.request.Request(
                    f"{lab.base}/api/sessions/{s['id']}?token={lab.token}", method="DELETE"
                )
                urllib.request.urlopen(req, timeout=10).close()
