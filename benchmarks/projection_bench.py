"""Projection benchmark: seconds for PCA, t-SNE and UMAP here, cold and cached, against
scikit-learn's TSNE and plain umap-learn; bytes per point and time to first render of
1M points in headless Chromium.

Data: a 64-d mixture of 10 Gaussian clusters (the shape of a penultimate-layer
embedding). "cold" is nbviz's ``compute_layout`` on a fresh run (t-SNE/UMAP above
``fit_size`` = 20,000 points are fitted on a sample and the rest placed into the
map); "cached" is the same call again (read back from the run). UMAP's first fit
in a process also pays its import and JIT compilation: measured once, apart.

    python benchmarks/projection_bench.py                    # 2k, 10k, 30k, 100k
    python benchmarks/projection_bench.py --sizes 2000 10000 --baseline-max 10000
    python benchmarks/projection_bench.py --only-render      # the browser part
    python benchmarks/projection_bench.py --first-fit        # UMAP's first fit, 2 kernels

``--first-fit``: two fresh processes in a row (as two kernels would), each
timing its first UMAP fit of 5,000 points, import included, with one numba
cache folder between them (a new one, or ``--cache-dir``); the first compiles,
the second should read the compiled code back.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from harness import Table, scratch, timed

import nbviz
from nbviz.analysis import projection as P


def mixture(n: int, d: int = 64, k: int = 10, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(k, d))
    labels = rng.integers(0, k, size=n)
    return (centres[labels] + rng.normal(size=(n, d))).astype(np.float32), labels


def nbviz_times(root: Path, X: np.ndarray, labels: np.ndarray, method: str) -> tuple[float, float]:
    path = root / f"{method}-{len(X)}"
    with nbviz.Run(path) as run:
        n = len(X)
        logits = np.eye(10, dtype=np.float32)[labels]
        run.log_predictions(0, logits, labels, ids=np.arange(n))
        run.log_embeddings(0, X, ids=np.arange(n))
        run.flush()
        cold, _ = timed(lambda: P.compute_layout(run, 0, method=method))
        warm, lay = timed(lambda: P.compute_layout(run, 0, method=method))
        assert lay.cached
    return cold, warm


def sklearn_tsne(X: np.ndarray) -> float:
    from sklearn.manifold import TSNE

    return timed(lambda: TSNE(n_components=2, random_state=0, init="pca").fit_transform(X))[0]


def plain_umap(X: np.ndarray) -> float:
    import umap

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return timed(lambda: umap.UMAP(random_state=0).fit_transform(X))[0]


def fmt(v: float | None) -> str:
    return "skipped" if v is None else f"{v:.2f}"


def projection_table(
    sizes: list[int], baseline_max: int, root: Path, methods: tuple[str, ...] = P.METHODS
) -> None:
    # umap-learn compiles with numba on first use: its layout code at the first fit, and
    # pynndescent's nearest-neighbour search at the first fit of 4,096 points or more.
    # and its transform at the first placement of new points. Paid once per process (a
    # kernel), by whichever call comes first: measured apart, so both columns are warm.
    if "umap" in methods:
        print("UMAP import + JIT (fit 5,000 points, place 1,000 more): ", end="", flush=True)
        t0 = time.perf_counter()
        P.project(mixture(6_000)[0], "umap", {"fit_size": 5_000})
        print(f"{time.perf_counter() - t0:.1f} s")
        print()
    table = Table(
        ["points", "PCA cold", "PCA cached", "t-SNE cold", "t-SNE cached", "sklearn TSNE"]
        + ["t-SNE speed-up", "UMAP cold", "UMAP cached", "plain umap-learn", "UMAP ratio"]
    )
    for n in sizes:
        X, labels = mixture(n)
        nan = (float("nan"), float("nan"))
        pca = nbviz_times(root, X, labels, "pca") if "pca" in methods else nan
        tsne = nbviz_times(root, X, labels, "tsne") if "tsne" in methods else nan
        sk = sklearn_tsne(X) if n <= baseline_max and "tsne" in methods else None
        um = nbviz_times(root, X, labels, "umap") if "umap" in methods else nan
        plain = plain_umap(X) if n <= baseline_max and "umap" in methods else None
        speed = f"{sk / tsne[0]:.2f}x" if sk else "-"
        ratio = f"{um[0] / plain:.2f}x" if plain else "-"
        table.row(
            f"{n:,}",
            f"{pca[0]:.2f}",
            f"{pca[1]:.3f}",
            f"{tsne[0]:.1f}",
            f"{tsne[1]:.3f}",
            fmt(sk),
            speed,
            f"{um[0]:.1f}",
            f"{um[1]:.3f}",
            fmt(plain),
            ratio,
        )
    print()
    print(
        f"cold/cached in seconds. Above {P.FIT_SIZE:,} points t-SNE and UMAP are fitted on "
        f"{P.FIT_SIZE:,} and the rest placed into the map. Baselines above {baseline_max:,} "
        "points skipped (--baseline-max)."
    )


_PAGE = """<!doctype html><html><body style="margin:0">
<div id="host" style="width:1000px"></div>
<script type="module">
import widget from "./projector.js";
window.__widget = widget;
</script></body></html>"""

# Decode the points as ipywidgets would hand them over (bytes -> DataView), then time
# render() until the scatter reports its first draw of every point.
_RENDER = """([state, blobs]) => {
  for (const [k, b64] of Object.entries(blobs)) {
    const raw = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    state.points[k].data = new DataView(raw.buffer);
  }
  const model = {get: (k) => state[k], set: (k, v) => { state[k] = v; },
    save_changes() {}, on() {}, off() {}, send() {}};
  window.__t0 = performance.now();
  window.__widget.render({model, el: document.getElementById("host")});
}"""


def render_time(n: int, static: Path) -> tuple[float, float, int]:
    """(Python payload build s, browser ms to first draw, bytes per point) for n points."""
    from playwright.sync_api import sync_playwright

    from nbviz.widgets.projector import EmbeddingProjector

    with scratch("nbviz-render-") as tmp:
        X, labels = mixture(n, d=64)
        with nbviz.Run(tmp / "run") as run:
            logits = np.eye(10, dtype=np.float32)[labels]
            run.log_predictions(0, logits, labels, ids=np.arange(n))
            run.log_embeddings(0, X, ids=np.arange(n))
        view = nbviz.open_run(tmp / "run")
        build, pj = timed(lambda: EmbeddingProjector(view, method="pca", live=False))
        used = ("points", "color_by", "filter_class", "empty", "error", "progress", "status")
        used += ("note", "method", "shown_method", "shown_step", "class_names", "selected_ids")
        state = {k: getattr(pj, k) for k in used}
        state.update(gallery=None, selection={}, highlight={}, hover_sample={})
        arrays = {k: v for k, v in state["points"].items() if isinstance(v, dict)}
        nbytes = sum(len(v["data"]) for v in arrays.values())
        exe = shutil.which("chromium") or "/usr/bin/chromium"
        args = ["--no-sandbox", "--use-angle=swiftshader", "--enable-unsafe-swiftshader"]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, headless=True, args=args)
            page = browser.new_page()
            page.route(
                "http://nbviz.bench/**",
                lambda route: route.fulfill(
                    body=(static / "projector.js").read_bytes()
                    if route.request.url.endswith(".js")
                    else _PAGE,
                    content_type="text/javascript"
                    if route.request.url.endswith(".js")
                    else "text/html",
                ),
            )
            page.goto("http://nbviz.bench/index.html")
            page.wait_for_function("() => window.__widget !== undefined")
            plain = {k: v for k, v in state.items() if k != "points"}
            plain["points"] = {
                **state["points"],
                **{k: {**v, "data": None} for k, v in arrays.items()},
            }
            page.evaluate(_RENDER, [plain, {k: _b64(v["data"]) for k, v in arrays.items()}])
            page.wait_for_selector(f'[data-drawn="{pj.points["n"]}"]', timeout=300_000)
            ms = float(page.evaluate("() => performance.now() - window.__t0"))
            browser.close()
        pj.close()
        return build, ms, nbytes // max(pj.points["n"], 1)


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


def render_table(sizes: list[int]) -> None:
    static = Path(nbviz.__file__).parent / "static"
    if not (static / "projector.js").is_file():
        print("front-end not built (make js): render timings skipped")
        return
    print()
    table = Table(
        ["points", "build payload in Python (PCA) s", "first draw in Chromium ms", "bytes/point"]
    )
    for n in sizes:
        build, ms, per = render_time(n, static)
        table.row(f"{n:,}", f"{build:.2f}", f"{ms:.0f}", per)
    print("\nChromium is headless with SwiftShader (software WebGL on 2 cores): a GPU is faster.")


_FIRST_FIT = """
import time, warnings
from benchmarks_path import mixture
from nbviz.analysis import projection as P
X = mixture(5_000)[0]
notes = []
t0 = time.perf_counter()
P.project(X, "umap", {}, progress=lambda f, m: notes.append(m))
print(f"{time.perf_counter() - t0:.2f}")
print(notes[1])
t0 = time.perf_counter()
P.project(X, "umap", {})
print(f"{time.perf_counter() - t0:.2f}")
"""


def first_fit_table(cache: Path | None, root: Path) -> None:
    """Two fresh processes in a row, each timing its first UMAP fit (5,000 points)."""
    folder = cache or root / "numba-cache"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(folder)}
    here = Path(__file__).resolve().parent
    env["PYTHONPATH"] = os.pathsep.join([str(here.parent / "src"), str(root)])
    (root / "benchmarks_path.py").write_text(
        f"import sys\nsys.path.insert(0, {str(here)!r})\nfrom projection_bench import mixture\n"
    )
    table = Table(
        ["kernel", "numba cache", "first UMAP fit s", "second fit s", "what the projector said"]
    )
    for k in (1, 2):
        warm = any(folder.rglob("*.nbi")) if folder.exists() else False
        out = subprocess.run(
            [sys.executable, "-c", _FIRST_FIT], env=env, capture_output=True, text=True, check=True
        ).stdout.splitlines()
        table.row(str(k), "warm" if warm else "empty", out[0], out[2], out[1][:70])
    files = sum(1 for _ in folder.rglob("*.nbi"))
    print(f"\nnumba cache: {folder} ({files} index files)")
    print("second fit: the same fit again in that process (nothing left to compile or import)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 10_000, 30_000, 100_000])
    parser.add_argument("--baseline-max", type=int, default=30_000)
    parser.add_argument("--render-sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--only-render", action="store_true")
    parser.add_argument("--first-fit", action="store_true", help="UMAP's first fit, 2 kernels")
    parser.add_argument("--cache-dir", type=Path, default=None, help="numba cache for --first-fit")
    parser.add_argument("--methods", nargs="+", choices=P.METHODS, default=list(P.METHODS))
    args = parser.parse_args(argv)
    with scratch("nbviz-projection-bench-") as root:
        if args.first_fit:
            first_fit_table(args.cache_dir, root)
            return 0
        if not args.only_render:
            projection_table(args.sizes, args.baseline_max, root, tuple(args.methods))
        render_table(args.render_sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
