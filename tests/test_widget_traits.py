"""Every settable trait of every view, set to generated values (hypothesis).

The settable traits are the synced ones the front-end writes (read from the
``save(model, {...})`` and ``model.set(...)`` calls of ``js/``): what a click
sets, and what a notebook sets to drive a view. A value is either accepted,
and then read back, the view's state still serialises for the browser and the
view takes its old value back; or refused at the assignment (TraitError,
TypeError or ValueError) with the trait keeping the value it had, so one bad
value never leaves a view broken until it is reset.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import traitlets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbviz

settings.register_profile(
    "widget-ci", max_examples=25, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.register_profile(
    "widget-thorough", max_examples=400, deadline=None, suppress_health_check=list(HealthCheck)
)
PROFILE = "widget-" + os.environ.get("NBVIZ_HYPOTHESIS", "ci")

VIEWS: dict[str, Callable[[Any], Any]] = {
    "LossCurves": lambda run: nbviz.LossCurves(run, live=False),
    "StepScrubber": lambda run: nbviz.StepScrubber(run, live=False),
    "LayerBrowser": lambda run: nbviz.LayerBrowser(run, live=False),
    "Histograms": lambda run: nbviz.Histograms(run, live=False),
    "ConfusionMatrix": lambda run: nbviz.ConfusionMatrix(run, live=False),
    "SampleGallery": lambda run: nbviz.SampleGallery(run, live=False),
    "EmbeddingProjector": lambda run: nbviz.EmbeddingProjector(run, method="pca", live=False),
    "HealthReport": lambda run: nbviz.HealthReport(run, live=False),
    "RunsTable": lambda run: nbviz.RunsTable([run], live=False),
    "AttentionMaps": lambda run: nbviz.AttentionMaps(run, live=False),
}
_OUTPUTS = (traitlets.Bytes, traitlets.Dict)
_BASE = {"layout", "tabbable", "tooltip", "comm", "keys", "log"}

values = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([-1, 0, 1, 2, 3, 5, 10, 2**53, 2**64]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["", "val", "train", "pca", "loss", "\ud800", "conv1", "0"]),
    st.booleans(),
    st.none(),
    st.lists(st.one_of(st.integers(-3, 2**64), st.text(max_size=3)), max_size=3),
)


JS = Path(__file__).resolve().parents[1] / "js"


def _written_by_the_front_end() -> set[str]:
    """Trait names the front-end sets: keys of ``save(model, {...})``, ``model.set("x", ...)``."""
    names: set[str] = set()
    for source in [*JS.glob("*.js"), *JS.glob("lib/**/*.js")]:
        text = source.read_text()
        names.update(re.findall(r"""model\.set\(\s*["'](\w+)["']""", text))
        for body in re.findall(r"save\(\s*model,\s*\{([^}]*)\}", text):
            names.update(re.findall(r"(?:^|,)\s*(\w+)\s*(?=[:,]|$)", body.strip()))
    return names


WRITTEN = _written_by_the_front_end()


def _settable(view: Any) -> list[str]:
    names = []
    for name, trait in view.traits(sync=True).items():
        if name.startswith("_") or name in _BASE or isinstance(trait, _OUTPUTS):
            continue
        if trait.read_only or name not in WRITTEN:
            continue
        names.append(name)
    return sorted(names)


def _serialisable(view: Any) -> None:
    state = view.get_state()
    plain = {k: v for k, v in state.items() if not isinstance(v, (bytes, memoryview, dict))}
    json.dumps(plain, default=str, ensure_ascii=False).encode("utf-8")


@pytest.fixture(scope="module")
def views(demo_run_path: Path):
    run = nbviz.open_run(demo_run_path)
    built = {name: make(run) for name, make in VIEWS.items()}
    yield built
    for view in built.values():
        view.close()
    run.close()


@pytest.mark.parametrize("view_name", list(VIEWS))
def test_every_synced_trait_takes_a_value_or_refuses_it_cleanly(views, view_name: str) -> None:
    view = views[view_name]
    names = _settable(view)
    assert names, f"{view_name} has no settable synced trait"
    seen: dict[str, int] = {}

    @settings(settings.get_profile(PROFILE))
    @given(name=st.sampled_from(names), value=values)
    def check(name: str, value: Any) -> None:
        seen[name] = seen.get(name, 0) + 1
        before = getattr(view, name)
        try:
            setattr(view, name, value)
        except (traitlets.TraitError, TypeError, ValueError) as exc:
            assert getattr(view, name) == before, (
                f"{view_name}.{name} = {value!r} was refused ({exc}) but left "
                f"{getattr(view, name)!r} behind"
            )
            assert str(exc)
            return
        _serialisable(view)
        setattr(view, name, before)  # the view takes its old value back
        assert getattr(view, name) == before

    check()
    print(f"{view_name}: {sum(seen.values())} values over {len(seen)} traits")


def test_a_list_of_texts_refuses_a_lone_surrogate_and_keeps_its_value(views) -> None:
    report = views["HealthReport"]
    before = list(report.expanded)
    with pytest.raises(traitlets.TraitError, match="expanded.*lone surrogate"):
        report.expanded = ["ok", "\ud800"]
    assert report.expanded == before
    _serialisable(report)
