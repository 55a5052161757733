"""The Binder configuration builds a working environment, checked the way Binder uses it.

Without Docker: a clean copy of the repository (its files, as a clone has them:
no node_modules, no built bundles), a fresh virtual environment, ``pip install -r
binder/requirements.txt``, ``binder/postBuild`` run from the repository root with
that environment first on PATH, and then notebooks/01-quickstart.ipynb executed
top to bottom in a kernel of that environment. pip's and npm's caches are the
user's usual ones (measured with warm caches on two cores: venv 7 s, requirements
56 s, postBuild 50 s, quickstart 10 s).

The PyTorch CPU index named in requirements.txt may be out of reach where this
runs; pip is told not to retry it (``PIP_RETRIES=0``) and finds the same
torch==2.13.0 through its configured indexes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parent.parent
QUICKSTART = "notebooks/01-quickstart.ipynb"
STEP_TIMEOUT = 1200  # seconds for one install step


def _repo_files() -> list[str]:
    """The repository's files as a clone holds them (tracked and not ignored)."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [f for f in out.split("\0") if f and (REPO / f).is_file()]


def _run(cmd: list[str], cwd: Path, env: dict[str, str], what: str) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT
    )
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-4000:]
        raise AssertionError(f"{what} failed with exit code {proc.returncode}:\n{tail}")
    print(f"  {what}: {seconds:.0f} s")
    return seconds


@pytest.mark.slow
def test_binder_environment_runs_the_quickstart(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is needed to copy the repository as a clone has it")
    repo = tmp_path / "repo"
    for name in _repo_files():
        dst = repo / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, dst)
    assert not (repo / "src/nbviz/static").exists() and not (repo / "js/node_modules").exists()
    assert os.access(repo / "binder/postBuild", os.X_OK), "binder/postBuild must be executable"

    venv = tmp_path / "venv"
    bin_dir = venv / "bin"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(
        VIRTUAL_ENV=str(venv),
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PIP_RETRIES="0",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    print()
    total = _run([sys.executable, "-m", "venv", str(venv)], repo, env, "venv")
    total += _run(
        [str(bin_dir / "python"), "-m", "pip", "install", "-r", "binder/requirements.txt"],
        repo,
        env,
        "pip install -r binder/requirements.txt",
    )
    total += _run(["bash", "binder/postBuild"], repo, env, "binder/postBuild")

    # nbviz and its bundles come from the environment, not from the copied checkout
    probe = subprocess.run(
        [
            str(bin_dir / "python"),
            "-c",
            "import json, torch, nbviz.widgets.base as b; "
            "print(json.dumps([b.STATIC.as_posix(), sorted(p.name for p in b.STATIC.glob('*.js')),"
            " torch.__version__]))",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    static, bundles, torch_version = json.loads(probe.stdout)
    assert static.startswith(venv.as_posix()), static
    assert {"scrubber.js", "confusion.js", "report_runtime.js"} <= set(bundles)
    assert torch_version.startswith("2.13.0")

    # the quickstart in a kernel of that environment, as Binder opens it
    kernels = tmp_path / "jupyter" / "kernels" / "binder"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [
                    str(bin_dir / "python"),
                    "-m",
                    "ipykernel_launcher",
                    "-f",
                    "{connection_file}",
                ],
                "display_name": "Binder environment",
                "language": "python",
                "env": {"PATH": env["PATH"], "VIRTUAL_ENV": str(venv)},
            }
        )
    )
    from nbclient import NotebookClient

    nb = nbformat.read(repo / QUICKSTART, as_version=4)
    t0 = time.perf_counter()
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(tmp_path / "jupyter")
    try:
        NotebookClient(
            nb,
            timeout=600,
            kernel_name="binder",
            resources={"metadata": {"path": str(repo / "notebooks")}},
        ).execute()
    finally:
        if old is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old
    seconds = time.perf_counter() - t0
    total += seconds
    print(f"  {QUICKSTART}: {seconds:.0f} s; {total:.0f} s in all")
    shutil.rmtree(venv, ignore_errors=True)  # about 1.5 GB; the caches keep what a rerun needs
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    # the Dashboard cell shows a widget view (the front-end renders it from the bundles)
    views = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert views, "the quickstart shows no widget"
