"""The built distributions carry the front-end: a wheel user needs no Node.

Builds the wheel (the npm build runs inside it), installs it into a fresh venv
that borrows this environment's dependencies through a .pth file (nothing is
downloaded), and checks nbviz loads its bundles from there, not from the source tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ENTRIES = sorted(p.stem for p in (REPO / "js").glob("*.js"))


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kwargs)
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited {proc.returncode}\n--- stdout\n{proc.stdout}\n"
            f"--- stderr\n{proc.stderr}"
        )
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "-w", str(out), str(REPO)]
    )  # fmt: skip
    (path,) = out.glob("nbviz-*.whl")
    return path


def test_every_js_entry_is_a_widget_bundle() -> None:
    assert "status" in ENTRIES
    assert "build" not in ENTRIES, "js/build.mjs is the build script, not an entry"


def test_wheel_carries_every_bundle_and_no_js_sources(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [e for e in ENTRIES if f"nbviz/static/{e}.js" not in names]
    assert not missing, f"bundles missing from {wheel.name}: {missing}"
    assert "nbviz/py.typed" in names
    assert "nbviz/widgets/base.py" in names
    assert not [n for n in names if n.startswith(("js/", "node_modules/"))]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "nbviz = nbviz.cli:main" in text


def test_wheel_bundles_are_minified_esm(wheel: Path) -> None:
    zf = zipfile.ZipFile(wheel)
    for entry in ENTRIES:
        code = zf.read(f"nbviz/static/{entry}.js").decode()
        assert "export" in code, f"{entry}.js is not an ES module"
        # minified code is a few long lines; a bundled library may keep newlines inside
        # string literals (regl-scatterplot's shaders), so look at the line length
        lines = code.split("\n")
        assert len(code) / len(lines) > 150, f"{entry}.js is not minified"
        assert "innerHTML" not in code, f"{entry}.js uses innerHTML"


def test_sdist_carries_js_sources_and_lock_but_no_build_output(
    tmp_path: Path,
) -> None:
    _run([sys.executable, "-m", "hatchling", "build", "-t", "sdist", "-d", str(tmp_path)], cwd=REPO)
    (sdist,) = tmp_path.glob("nbviz-*.tar.gz")
    with tarfile.open(sdist) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    for needed in ["js/package.json", "js/package-lock.json", "js/build.mjs", "js/lib/wire.js",
                   "pyproject.toml", "src/nbviz/__init__.py"]:  # fmt: skip
        assert needed in names, f"{needed} missing from {sdist.name}"
    assert all(f"js/{e}.js" in names for e in ENTRIES)
    assert not [n for n in names if "node_modules" in n or n.startswith("src/nbviz/static/")]


def test_wheel_installs_into_a_fresh_venv_and_finds_its_bundles(
    wheel: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    purelib = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).stdout.strip()
    )
    # the dependencies come from this environment: no download
    here = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (purelib / "_nbviz_test_deps.pth").write_text("\n".join(sorted(here)) + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
          "--no-index", str(wheel)])  # fmt: skip

    check = """
import json, nbviz
from nbviz.widgets.base import esm
from nbviz.widgets.status import StatusMessage
bundle = esm("status")
print(json.dumps({
    "file": nbviz.__file__,
    "version": nbviz.__version__,
    "bundle": str(bundle),
    "bundle_size": len(bundle.read_text()),
    "widget_loads_bundle": str(StatusMessage("x")._esm) == bundle.read_text(),
}))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    result = json.loads(_run([str(python), "-c", check], cwd=tmp_path, env=env).stdout)
    assert Path(result["file"]).is_relative_to(venv), result["file"]
    assert Path(result["bundle"]).is_relative_to(venv), result["bundle"]
    assert result["bundle_size"] > 0
    assert result["widget_loads_bundle"]
    from nbviz import __version__

    assert result["version"] == __version__
    assert (venv / "bin" / "nbviz").exists(), "console script not installed"
