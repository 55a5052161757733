"""The browser-test fixtures themselves: what they promise every test (see conftest.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent

PAGES_THAT_LOG = """
def test_console_error(page):
    page.evaluate("console.error('boom from the page')")


def test_uncaught_exception(page):
    page.add_script_tag(content="throw new Error('uncaught boom')")
    page.evaluate("1")


def test_unhandled_rejection(page):
    page.evaluate("() => { Promise.reject(new Error('rejected boom')); }")
    page.evaluate("1")


def test_resize_observer_loop(page):
    page.evaluate('''() => {
      const d = document.createElement("div");
      d.id = "grow";
      d.style.width = "1px";
      document.body.append(d);
      new ResizeObserver(() => { d.style.width = `${d.offsetWidth + 1}px`; }).observe(d);
    }''')
    page.wait_for_function("document.getElementById('grow').offsetWidth > 4")


def test_warning_from_our_code(page):
    page.evaluate("console.warn('regl-scatterplot: the keyMap property is deprecated')")


def test_allowed_error(page, console):
    page.evaluate("console.warn('a warning from somebody else')")
    console.allow("expected boom")
    page.evaluate("console.error('an expected boom')")
    page.evaluate("console.log('not an error')")
"""


def test_a_cell_that_raises_fails_the_run_with_its_error(nb) -> None:
    with pytest.raises(AssertionError, match=r"cell 1: ZeroDivisionError: division by zero"):
        nb.run("raises.ipynb", ["x = 41 + 1", "1 / 0"])
    assert nb.kernel_eval("x") == "42"
    nb.run("raises-allowed.ipynb", ["1 / 0"], allow_errors=True)


def test_a_page_error_fails_the_test_unless_it_is_allowed(browser: Any, tmp_path: Path) -> None:
    for name in ("conftest.py", "lab.py", "notebook_page.py"):
        shutil.copy(HERE / name, tmp_path / name)
    (tmp_path / "test_pages.py").write_text(PAGES_THAT_LOG)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", os.devnull]
        + ["--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    out = done.stdout + done.stderr
    assert "5 failed, 1 passed" in out, out
    for name in ("unhandled_rejection", "resize_observer_loop", "warning_from_our_code"):
        assert f"FAILED test_pages.py::test_{name}" in out, out
    assert "pageerror: rejected boom" in out, out
    assert "window error: ResizeObserver loop" in out, out
    assert "console.warning: regl-scatterplot" in out, out
    assert "FAILED test_pages.py::test_console_error" in out, out
    assert "console.error: boom from the page" in out, out
    assert "FAILED test_pages.py::test_uncaught_exception" in out, out
    assert "pageerror: uncaught boom" in out, out
    # a failed test leaves a screenshot of its page
    assert (tmp_path / "_artifacts" / "test_console_error-failed.png").is_file()
