"""JupyterLab for the browser tests: the server, notebooks written to its root, and
the kernel read out of band.

The fixtures in ``conftest.py`` use this module; a test asks for them (``lab``,
``nb``) and never starts a server itself.
"""

from __future__ import annotations

import contextlib
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

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = REPO / "notebooks"
START_TIMEOUT_S = 60


class LabError(RuntimeError):
    """The server did not start; the message carries its log."""


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

    def api(self, path: str, method: str = "GET") -> Any:
        req = urllib.request.Request(f"{self.base}/api/{path}?token={self.token}", method=method)
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def kernel_eval(self, expr: str, notebook: str | None = None, timeout: float = 30) -> str:
        """Evaluate ``expr`` in a notebook's kernel, out of band; returns its ``text/plain``.

        ``notebook`` is the notebook's path in the server root; it may be left out
        while only one session is open. A silent execution: the notebook is unchanged.
        """
        sessions = self.api("sessions")
        if notebook is not None:
            sessions = [s for s in sessions if s.get("path") == notebook]
        if len(sessions) != 1:
            paths = [s.get("path") for s in self.api("sessions")]
            raise AssertionError(
                f"kernel_eval: need exactly one session for notebook={notebook!r}, open: {paths}"
            )
        kc = _client(self.runtime_dir, sessions[0]["kernel"]["id"])
        reply = kc.execute_interactive(
            "", silent=True, user_expressions={"v": expr}, timeout=timeout
        )
        result = reply["content"]["user_expressions"]["v"]
        if result.get("status") != "ok":
            raise AssertionError(
                f"kernel_eval({expr!r}) raised {result.get('ename')}: {result.get('evalue')}"
            )
        return result["data"]["text/plain"]

    def shut_down(self, notebook: str) -> None:
        """Shut down the kernel session of ``notebook`` (a path in the server root)."""
        for s in self.api("sessions"):
            if s.get("path") == notebook:
                self.api(f"sessions/{s['id']}", method="DELETE")


# One client per kernel, reused: a client per call (tests poll) runs out of file descriptors.
_CLIENTS: dict[str, Any] = {}


def _client(runtime_dir: Path, kernel_id: str) -> Any:
    from jupyter_client import BlockingKernelClient

    kc = _CLIENTS.get(kernel_id)
    if kc is None:
        for old in _CLIENTS.values():  # earlier tests' kernels are gone
            old.stop_channels()
        _CLIENTS.clear()
        kc = BlockingKernelClient(connection_file=str(runtime_dir / f"kernel-{kernel_id}.json"))
        kc.load_connection_file()
        kc.start_channels()
        _CLIENTS[kernel_id] = kc
    return kc


#: Seconds a session's JupyterLab server may live: the whole browser suite runs in one
#: server, 15-17 minutes on a slow day on 2 cores (at 900 s the server was stopped under
#: the last tests).
SERVER_LIFETIME = 3600


@contextlib.contextmanager
def running_lab(tmp: Path) -> Iterator[Lab]:
    """A JupyterLab server in isolated dirs under ``tmp``, serving a temporary root.

    The root starts as a copy of notebooks/ (Lab autosaves; the repo's files stay
    clean); tests add their own notebooks with ``write_notebook``. The kernel imports
    this checkout's nbviz, whatever is installed. The server is bounded by ``timeout``
    (:data:`SERVER_LIFETIME`, a guard against a server left behind by a session that
    died, not a test budget) and stopped with the process group it was started in
    (nothing else).
    """
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
        PYTHONPATH=os.pathsep.join(
            p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH", "")) if p
        ),
    )
    # no "get notified about official Jupyter news?" toast over the page
    settings = tmp / "set/@jupyterlab/apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}'
    )
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    log = tmp / "server.log"
    command = [
        "timeout",
        str(SERVER_LIFETIME),
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
    ]
    with open(log, "w") as out:
        proc = subprocess.Popen(
            command, env=env, start_new_session=True, stdout=out, stderr=subprocess.STDOUT
        )
    lab = Lab(base=f"http://127.0.0.1:{port}", token=token, root=root, runtime_dir=runtime, log=log)
    try:
        _wait_until_up(lab, proc)
        yield lab
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # only the group started here
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def _wait_until_up(lab: Lab, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise LabError(f"JupyterLab exited with {proc.returncode}:\n{lab.log.read_text()}")
        try:
            lab.api("status")
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            if time.monotonic() > deadline:
                raise LabError(
                    f"JupyterLab did not answer within {START_TIMEOUT_S} s:\n{lab.log.read_text()}"
                ) from None
            time.sleep(0.2)
