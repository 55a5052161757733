"""Damaged and hostile run files: every case ends in data read correctly or a clear nbviz error.

Each case damages a copy of a real run (the digits demo) one way: truncations,
bit flips, random bytes, schema objects nbviz did not create (a recursive view,
triggers), meta values of the wrong type, bad blobs, a cut-short log. A
subprocess then opens the copy and calls every read method and builds the
Dashboard, under a timeout, so that a hang fails the test instead of hanging
CI. Every call must either return what the undamaged run returns or raise an
nbviz error (RunFileError, or the ValueError/KeyError of data that is absent);
a leaked sqlite3 exception, another exception type, a value that differs from
the original without a RunFileWarning, or a timeout fails the case (bytes
flipped inside stored values are the one exception, see VALUE_BYTES_FLIPPED).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import nbviz
from nbviz.store import DB_NAME, Writer

SRC = str(Path(nbviz.__file__).resolve().parents[1])
CASE_TIMEOUT_S = 120

# The reads every case makes, each compared with the same read on the undamaged run.
READER = textwrap.dedent(
    """
    import hashlib, json, sys, warnings
    import numpy as np
    import nbviz
    from nbviz.store import RunFileError, MissingStepError

    def digest(value):
        if isinstance(value, tuple):
            return [digest(v) for v in value]
        if isinstance(value, np.ndarray):
            data = np.ascontiguousarray(value).tobytes()
            return [str(value.dtype), list(value.shape), hashlib.sha1(data).hexdigest()]
        if hasattr(value, "columns") and hasattr(value, "to_dict"):
            plain = lambda v: v.tolist() if isinstance(v, np.ndarray) else v
            columns = {c: [plain(v) for v in value[c]] for c in value.columns}
            return hashlib.sha1(repr(columns).encode()).hexdigest()
        try:
            return json.loads(json.dumps(value, default=str))
        except Exception:
            return repr(value)

    def reads(run):
        layer = lambda: run.recorded_layers("activation", table="histograms")[0]
        hstep = lambda: int(run.histogram_steps(layer(), "activation")[-1])
        step = lambda: int(run.steps("activation")[-1])
        pstep = lambda: int(run.prediction_steps("val")[-1])
        yield "meta", lambda: run.meta()
        yield "name", lambda: run.name
        yield "config", lambda: run.config
        yield "class_names", lambda: run.class_names
        yield "layers", lambda: run.layers()
        yield "scalars", lambda: run.scalars()
        yield "scalar_names", lambda: run.scalar_names()
        yield "steps", lambda: run.steps("activation")
        yield "stats", lambda: run.stats("activation")
        yield "stats_at", lambda: run.stats_at(step())
        yield "histogram", lambda: run.histogram(layer(), "activation", hstep())
        yield "histogram_rows", lambda: run.histogram_rows(layer(), "activation")
        yield "histograms_at", lambda: run.histograms_at(hstep())
        yield "unit_stats", lambda: run.unit_stats(*run._pairs("unit_stats")[0])
        yield "events", lambda: run.events()
        yield "predictions", lambda: run.predictions()
        yield "probabilities", lambda: run.probabilities(pstep())
        yield "samples", lambda: run.samples()
        yield "embeddings", lambda: run.embeddings(None)
        yield "captured_ids", lambda: run.captured_ids()
        yield "profiles", lambda: run.profiles()
        yield "diagnose", lambda: run.diagnose()

    ABSENT = (MissingStepError, KeyError, IndexError, ValueError)

    def visit(path, base):
        out = {"open": "ok", "reads": {}, "warned": False}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                run = nbviz.open_run(path)
            except RunFileError as exc:
                out["open"] = "RunFileError: " + str(exc)
                return out
            except BaseException as exc:
                out["open"] = f"LEAK {type(exc).__module__}.{type(exc).__name__}: {exc}"
                return out
            with run:
                for name, read in reads(run):
                    try:
                        value = digest(read())
                        out["reads"][name] = "same" if value == base.get(name) else "DIFFERENT"
                    except RunFileError as exc:
                        out["reads"][name] = "RunFileError"
                    except ABSENT as exc:
                        if type(exc).__module__.startswith("sqlite3"):
                            raise
                        out["reads"][name] = "absent: " + str(exc)[:200]
                    except BaseException as exc:
                        kind = f"{type(exc).__module__}.{type(exc).__name__}"
                        out["reads"][name] = f"LEAK {kind}: {exc}"[:400]
                try:
                    import nbviz.widgets.dashboard as d
                    d.Dashboard(run).close()
                    out["dashboard"] = "ok"
                except RunFileError:
                    out["dashboard"] = "RunFileError"
                except BaseException as exc:
                    out["dashboard"] = f"LEAK {type(exc).__name__}: {exc}"[:400]
        out["warned"] = any(issubclass(w.category, nbviz.store.RunFileWarning) for w in caught)
        return out

    if sys.argv[1] == "--base":
        with nbviz.open_run(sys.argv[2]) as run:
            base = {}
            for name, read in reads(run):
                base[name] = digest(read())
        print(json.dumps(base))
    else:
        base = json.loads(open(sys.argv[2]).read())
        print(json.dumps(visit(sys.argv[1], base)))
    """
)


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [SRC, env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", READER, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=CASE_TIMEOUT_S,
    )


@pytest.fixture(scope="module")
def base(demo_run_path: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The demo run and the digest of every read of it (what a damaged copy is compared with)."""
    done = _python("--base", str(demo_run_path))
    assert done.returncode == 0, done.stderr
    digest = tmp_path_factory.mktemp("digest") / "base.json"
    digest.write_text(done.stdout)
    return demo_run_path, digest


# -- the damage ---------------------------------------------------------------------------


def _sql(*statements: str) -> Callable[[Path], None]:
    def damage(file: Path) -> None:
        conn = sqlite3.connect(file)
        for statement in statements:
            conn.execute(statement)
        conn.commit()
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.close()

    return damage


def _truncate(fraction: float) -> Callable[[Path], None]:
    def damage(file: Path) -> None:
        with open(file, "r+b") as f:
            f.truncate(int(file.stat().st_size * fraction))

    return damage


def _flip(offsets: Callable[[int], list[int]]) -> Callable[[Path], None]:
    def damage(file: Path) -> None:
        data = bytearray(file.read_bytes())
        for offset in offsets(len(data)):
            data[offset] ^= 0xFF
        file.write_bytes(bytes(data))

    return damage


def _random_bytes(file: Path) -> None:
    file.write_bytes(os.urandom(64 * 1024))


def _empty(file: Path) -> None:
    file.write_bytes(b"")


def _directory(file: Path) -> None:
    file.unlink()
    file.mkdir()


def _cut_log(file: Path) -> None:
    """The run becomes a copy, taken while it was written, whose log was then cut short."""
    writer = Writer(file.parent / "live")
    shutil.copy(file, file.parent / "live" / DB_NAME)  # the whole run, then more in the log
    writer.close()
    live = Writer(file.parent / "live")
    live.insert("scalars", [("late", s, 1.0, time.time()) for s in range(2000)])
    live.flush()
    shutil.copy(file.parent / "live" / DB_NAME, file)
    wal = file.parent / "live" / f"{DB_NAME}-wal"
    data = wal.read_bytes()
    Path(f"{file}-wal").write_bytes(data[: len(data) // 2])
    live.close()


RECURSIVE = (
    "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
    "SELECT 'loss', i, randomblob(1000), 0 FROM r"
)

CASES: dict[str, Callable[[Path], None]] = {
    "truncated to a third": _truncate(1 / 3),
    "truncated by one byte": _truncate(0.99999),
    "truncated to the header": lambda f: _truncate(0)(f) or f.write_bytes(b"SQLite format 3\0"),
    "random bytes": _random_bytes,
    "empty file": _empty,
    "a directory named run.sqlite": _directory,
    "header bytes flipped": _flip(lambda n: list(range(16, 100, 7))),
    "schema page flipped": _flip(lambda n: list(range(100, 4096, 97))),
    "every page's header flipped": _flip(lambda n: [p + 3 for p in range(4096, n, 4096)]),
    "bytes flipped across the file": _flip(lambda n: list(range(5000, n, n // 40))),
    "scalars a recursive view": _sql("DROP TABLE scalars", f"CREATE VIEW scalars AS {RECURSIVE}"),
    "a trigger": _sql("CREATE TRIGGER t AFTER INSERT ON meta BEGIN DELETE FROM scalars; END"),
    "an extra view": _sql("CREATE VIEW v AS SELECT 1"),
    "an extra index": _sql("CREATE INDEX i ON scalars(value)"),
    "a missing table": _sql("DROP TABLE histograms"),
    "schema_version 'abc'": _sql("UPDATE meta SET value = '\"abc\"' WHERE key = 'schema_version'"),
    "schema_version not JSON": _sql("UPDATE meta SET value = '{' WHERE key = 'schema_version'"),
    "meta.model a list": _sql("UPDATE meta SET value = '[1, 2]' WHERE key = 'model'"),
    "class_names 5": _sql("UPDATE meta SET value = '5' WHERE key = 'class_names'"),
    "config not JSON": _sql("UPDATE meta SET value = '{x' WHERE key = 'config'"),
    "bad probability blob": _sql("UPDATE probabilities SET probs = x'0102'"),
    "bad embedding shape": _sql("UPDATE embeddings SET shape = '[999, 999]'"),
    "bad histogram counts": _sql("UPDATE histograms SET counts = x'010203'"),
    "bad unit values": _sql("UPDATE unit_stats SET \"values\" = x'01'"),
    "text where a step is": _sql(
        "UPDATE layer_stats SET step = 'abc' WHERE step = (SELECT min(step) FROM layer_stats)"
    ),
    "a log cut short": _cut_log,
}


# SQLite keeps no checksum of what a page holds: a flip inside a stored value's bytes
# (a probability, an embedding) changes that value and nothing can tell. For these
# cases the suite asserts no leak and no hang, and prints which reads differ.
VALUE_BYTES_FLIPPED = {"bytes flipped across the file"}


@pytest.mark.parametrize("case", list(CASES))
def test_a_damaged_run_reads_correctly_or_fails_clearly(
    case: str, base: tuple[Path, Path], tmp_path: Path
) -> None:
    run, digest = base
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    CASES[case](copy / DB_NAME)
    started = time.monotonic()
    done = _python(str(copy), str(digest))
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    leaks = {k: v for k, v in result["reads"].items() if v.startswith("LEAK")}
    assert not result["open"].startswith("LEAK"), result["open"]
    assert not leaks, leaks
    assert not result.get("dashboard", "").startswith("LEAK"), result["dashboard"]
    if result["open"].startswith("RunFileError"):
        assert str(copy) in result["open"]  # the error names the file
    different = [k for k, v in result["reads"].items() if v == "DIFFERENT"]
    if case not in VALUE_BYTES_FLIPPED:
        assert not different or result["warned"], f"values changed without a warning: {different}"
    print(f"{case}: {result['open'][:120]} {result['reads']} ({seconds:.1f} s)")


@pytest.mark.parametrize(
    ("case", "read"),
    [
        ("random bytes", "does not start as an SQLite database does"),
        ("truncated to a third", "it was cut short"),
        ("scalars a recursive view", "view 'scalars'"),
        ("meta.model a list", "meta values that decode: "),
        ("a directory named run.sqlite", "is a directory, not a database file"),
    ],
)
def test_nbviz_info_on_a_damaged_run_says_what_it_could_read(
    case: str, read: str, base: tuple[Path, Path], tmp_path: Path
) -> None:
    copy = tmp_path / "run"
    shutil.copytree(base[0], copy)
    CASES[case](copy / DB_NAME)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [SRC, env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "nbviz.cli", "info", str(copy), "--no-findings"],
        capture_output=True,
        text=True,
        env=env,
        timeout=CASE_TIMEOUT_S,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr + done.stdout
    assert done.stderr.startswith(f"nbviz info: {copy}")
    assert f"what could be read of {copy}:" in done.stdout
    assert read in done.stdout
