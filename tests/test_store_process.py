"""The store across processes: live readers, crashes, and what importing it pulls in."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

import nbviz
from nbviz.store import DB_NAME, Reader, Writer

PYTHON = sys.executable
SRC = str(Path(nbviz.__file__).resolve().parents[1])


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [SRC, env.get("PYTHONPATH")]))
    return env


def _spawn(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [PYTHON, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )


def test_importing_the_store_pulls_in_neither_torch_nor_widgets() -> None:
    code = """
        import sys
        import nbviz.store
        heavy = [m for m in ("torch", "ipywidgets", "anywidget", "bqplot") if m in sys.modules]
        print(",".join(heavy) or "none")
    """
    out = subprocess.run(
        [PYTHON, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "none"


def test_a_reader_in_another_process_follows_a_run_being_written(tmp_path: Path) -> None:
    run = tmp_path / "run"
    more = 30  # steps the reader must see arrive after it opened the run
    w = Writer(run, commit_interval=0.05)
    w.insert("scalars", [("loss", 0, 1.0, time.time())])
    w.flush()
    reader = _spawn(
        """
        import sys, time
        from nbviz.store import Reader
        r = Reader(sys.argv[1])
        first = int(r.scalars("loss")["step"].max())  # the run has grown while we started
        print(first, flush=True)
        target, seen = first + int(sys.argv[2]), first
        deadline = time.monotonic() + 30
        while seen < target and time.monotonic() < deadline:
            last = int(r.scalars("loss")["step"].max())
            if last > seen:
                seen = last
                print(seen, flush=True)
            time.sleep(0.01)
        """,
        str(run),
        str(more),
    )
    step = 0
    deadline = time.monotonic() + 30
    try:
        while reader.poll() is None and time.monotonic() < deadline:
            step += 1
            w.insert("scalars", [("loss", step, 1.0 / step, time.time())])
            time.sleep(0.01)
        assert reader.poll() is not None, "the reader never saw the target step"
        out, err = reader.communicate(timeout=10)
    finally:
        if reader.poll() is None:
            reader.kill()
        w.close()
    assert reader.returncode == 0, err
    seen = [int(line) for line in out.split()]
    assert seen == sorted(seen) and seen[-1] >= seen[0] + more
    assert len(seen) >= 3, f"the reader saw {seen}: not a run growing under it"
    assert step >= seen[-1]


def test_a_killed_writer_loses_nothing_it_flushed_and_leaves_a_sound_database(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    writer = _spawn(
        """
        import sys
        from nbviz.store import Writer
        w = Writer(sys.argv[1], commit_interval=0.01)
        layers = [f"layer{i}" for i in range(20)]
        def rows(step):
            return [(step, la, "activation", 10, 0.5, 1.0, 0.0, 1.0, 0.0, 0, 2.0, None)
                    for la in layers]
        for step in range(500):
            w.insert("layer_stats", rows(step))
        w.flush()
        print("flushed", flush=True)
        step = 500
        while True:  # keep writing until killed
            w.insert("layer_stats", rows(step))
            step += 1
        """,
        str(run),
    )
    try:
        line = writer.stdout.readline()
        assert line.strip() == "flushed", writer.stderr.read()
        time.sleep(0.05)  # let it get into the middle of later batches
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=10)
    finally:
        if writer.poll() is None:
            writer.kill()
        writer.stdout.close()
        writer.stderr.close()
    assert writer.returncode == -signal.SIGKILL
    conn = sqlite3.connect(run / DB_NAME)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        flushed = conn.execute("SELECT count(*) FROM layer_stats WHERE step < 500").fetchone()[0]
    finally:
        conn.close()
    assert flushed == 500 * 20
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a write cut off by the kill is not a damaged log
        with Reader(run) as r:
            assert r.steps("activation")[:500].tolist() == list(range(500))


def test_a_normal_interpreter_exit_commits_what_was_not_flushed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    code = """
        import sys
        from nbviz.store import Writer
        w = Writer(sys.argv[1], commit_interval=60.0)
        w.insert("scalars", [("loss", s, 1.0, 0.0) for s in range(100)])
        # no flush, no close: the exit handler commits
    """
    out = subprocess.run(
        [PYTHON, "-c", textwrap.dedent(code), str(run)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    with Reader(run) as r:
        assert len(r.scalars("loss")) == 100


@pytest.mark.parametrize("how", ["close", "exit"])
def test_writer_errors_are_not_swallowed_at_exit(tmp_path: Path, how: str) -> None:
    code = f"""
        import sys
        from nbviz.store import Writer
        w = Writer(sys.argv[1])
        w.execute("INSERT INTO no_such_table VALUES (1)")
        if {how == "close"!r}:
            w.close()
    """
    out = subprocess.run(
        [PYTHON, "-c", textwrap.dedent(code), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert "no_such_table" in out.stderr
    if how == "close":
        assert out.returncode != 0 and "WriterError" in out.stderr
