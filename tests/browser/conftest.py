"""Browser tests: a real JupyterLab server driven by headless Chromium through Playwright.

A new test needs only the ``nb`` fixture: it writes a notebook, runs it in the
session's JupyterLab, waits for the view, clicks, and reads the kernel back::

    from playwright.sync_api import expect

    def test_status_renders_and_dismisses(nb):
        view = nb.run("status.ipynb", [
            "from nbviz.widgets.status import StatusMessage",
            "w = StatusMessage('hi', dismissible=True); w",
        ], ready=".nbviz-status")                   # visible once the JS has drawn
        expect(view.locator(".nbviz-message-text")).to_have_text("hi")
        view.locator(".nbviz-dismiss").click()
        nb.wait_kernel("w.dismissed", "True")     # a click reaches the kernel async
        nb.screenshot("status")                   # tests/browser/_artifacts/status.png

What the fixtures do for every test, so a test does not:

- ``nb.run(name, cells, ready=..., timeout_ms=...)`` writes the notebook into the
  server's root, opens it, waits until the kernel is really idle, runs all cells,
  fails at once with the error of a cell that raised (``allow_errors=True`` to
  keep going), and waits until ``ready`` is visible (returned as a locator).
  ``nb.write``/``nb.open``/``nb.run_all`` are the steps one by one.
- ``nb.run_code(code)`` appends a cell to the open notebook, runs it, and returns
  its output locator; ``nb.kernel_eval(expr)`` reads a value out of band (the
  notebook is unchanged); ``nb.wait_kernel(expr, expected_or_predicate)`` polls it.
- Console errors, uncaught page exceptions and unhandled rejections, errors the
  window reports without an exception (a ResizeObserver loop), and warnings from
  nbviz's own code, of every page the test opened, fail it after its body has run
  (``console.allow(regex)`` for an error a test provokes on purpose;
  ``console.errors`` lists what was logged).
- A failed test leaves ``tests/browser/_artifacts/<test>-failed.png``.
- The notebook's kernel is shut down afterwards; each test starts from its own.

Fixtures: ``lab`` (one server per session; ``lab.root`` is where notebooks go),
``browser`` (one Chromium per session), ``new_page(**context_options)`` (more
pages, e.g. ``offline=True``, watched the same way), ``page`` (one plain page),
``console`` and ``nb``. Give a view's elements class names to select on and
wait for text or attributes the JS writes, not for time.

Chromium missing: the tests are skipped, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from lab import Lab, LabError, running_lab
from notebook_page import ARTIFACTS, WAIT_MS, NotebookPage

HERE = Path(__file__).parent
IN_CI = os.environ.get("CI", "").lower() == "true"

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
VIEWPORT = {"width": 1280, "height": 900}


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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Fail a test whose pages logged a console error that it did not allow."""
    result = yield
    console = getattr(item, "funcargs", {}).get("console")
    if isinstance(console, Console) and console.unexpected():
        pytest.fail("the page logged errors:\n" + "\n".join(console.unexpected()), pytrace=False)
    return result


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


# Errors the window reports without an exception, which Playwright's "pageerror" never
# sees ("ResizeObserver loop completed with undelivered notifications"): logged as errors.
WINDOW_ERRORS = """
window.addEventListener("error", (e) => {
  if (!e.error) console.error(`window error: ${e.message}`);
});
"""


def is_ours(msg: Any) -> bool:
    """A console message from nbviz's front-end: its bundles load as anywidget blob
    modules (in JupyterLab) or are named in the text (the offline report)."""
    url = (msg.location or {}).get("url", "") or ""
    return url.startswith("blob:") or bool(re.search(r"nbviz|regl", msg.text, re.IGNORECASE))


class Console:
    """What a test's pages log as errors: ``console.error``, uncaught exceptions and
    unhandled rejections, errors the window reports without an exception, and
    warnings from nbviz's own code (its bundles and the libraries bundled in them)."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self._allowed: list[re.Pattern[str]] = []

    def _on_console(self, msg: Any) -> None:
        if msg.type == "error" or (msg.type == "warning" and is_ours(msg)):
            self.errors.append(f"console.{msg.type}: {msg.text}")

    def watch(self, page: Any) -> None:
        page.on("console", self._on_console)
        page.on("pageerror", lambda exc: self.errors.append(f"pageerror: {exc}"))

    def allow(self, pattern: str) -> None:
        """Errors matching ``pattern`` (a regex searched in the message) do not fail the test."""
        self._allowed.append(re.compile(pattern))

    def unexpected(self) -> list[str]:
        return [e for e in self.errors if not any(p.search(e) for p in self._allowed)]


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """One JupyterLab server for the session (see ``lab.running_lab``)."""
    try:
        with running_lab(tmp_path_factory.mktemp("lab")) as server:
            yield server
    except LabError as exc:
        pytest.fail(str(exc), pytrace=False)


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
def console() -> Console:
    """This test's console errors; any not allowed fails the test after its body."""
    return Console()


@pytest.fixture
def new_page(
    request: pytest.FixtureRequest, browser: Any, console: Console
) -> Iterator[Callable[..., Any]]:
    """Make pages in fresh browser contexts (keyword arguments go to ``new_context``).

    Each page's console is watched; each is screenshot into tests/browser/_artifacts/
    when the test fails, and closed afterwards.
    """
    contexts: list[Any] = []

    def make(**context_options: Any) -> Any:
        context = browser.new_context(**{"viewport": VIEWPORT, **context_options})
        context.add_init_script(WINDOW_ERRORS)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        console.watch(page)
        return page

    try:
        yield make
    finally:
        rep = getattr(request.node, "rep_call", None)
        for i, context in enumerate(contexts):
            if rep is not None and rep.failed:
                ARTIFACTS.mkdir(exist_ok=True)
                name = request.node.name + (f"-{i}" if i else "")
                for page in context.pages:
                    try:
                        page.screenshot(path=str(ARTIFACTS / f"{name}-failed.png"))
                    except Exception as exc:  # the page may be gone; the failure matters more
                        print(f"could not save a failure screenshot: {exc}")
            context.close()


@pytest.fixture
def page(new_page: Callable[..., Any]) -> Any:
    """A fresh page in its own context (see ``new_page``)."""
    return new_page()


@pytest.fixture
def nb(page: Any, lab: Lab) -> Iterator[NotebookPage]:
    """This test's page in the session's JupyterLab; see the module docstring."""
    notebook = NotebookPage(page=page, lab=lab)
    try:
        yield notebook
    finally:
        notebook.close()
