"""Properties of every public write call and read method, over generated input (hypothesis).

Each input is either accepted and read back equal, with the views built on the
result, or refused at the call with a TypeError/ValueError (or an nbviz error)
whose message names the argument and shows the value; nothing accepted is
lost later (the writer never fails at flush).

The example counts come from the hypothesis profile: ``NBVIZ_HYPOTHESIS=ci``
(the default, bounded for CI) or ``NBVIZ_HYPOTHESIS=thorough``.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import nbviz
from nbviz.arguments import MAX_CLASS, MAX_STEP
from nbviz.store import RunFileError

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("NBVIZ_HYPOTHESIS", "ci"))

REFUSED = (TypeError, ValueError, RunFileError)


def _refused_clearly(exc: BaseException, *names: str) -> None:
    """A refusal names the call, and the argument or the value it refused."""
    text = str(exc)
    assert ":" in text, text
    assert any(n in text for n in names), f"{text!r} names none of {names}"


def _fresh() -> nbviz.Run:
    return nbviz.Run(Path(tempfile.mkdtemp(prefix="nbviz-prop-")) / "run")


# -- strategies ------------------------------------------------------------------------------

steps = st.one_of(
    st.integers(min_value=-5, max_value=2**70),
    st.sampled_from([0, MAX_STEP, MAX_STEP + 1, 2**63, -1]),
    st.floats(allow_nan=True),
    st.booleans(),
    st.text(max_size=3),
    st.none(),
)
texts = st.text(
    alphabet=st.characters(codec=None, blacklist_categories=()), min_size=0, max_size=12
)
numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**1100), max_value=2**1100),
    st.booleans(),
    st.text(max_size=3),
    st.complex_numbers(max_magnitude=10),
)


# -- write calls -------------------------------------------------------------------------------


@given(step=steps, name=texts, value=numbers)
def test_log_reads_back_what_it_accepts(step: Any, name: Any, value: Any) -> None:
    with _fresh() as run:
        try:
            run.log(step, **{name: value}) if name.isidentifier() else run.log(step, {name: value})
        except REFUSED as exc:
            _refused_clearly(exc, "step", "name", repr(name)[:20], "float64", "number", "log:")
            run.flush()
            assert run.scalars().empty
            return
        run.flush()
        frame = run.scalars()
        assert frame["step"].tolist() == [int(step)] and frame["name"].tolist() == [name]
        stored = frame["value"].iloc[0]
        expected = float(value)
        assert stored == expected or (math.isnan(stored) and math.isnan(expected))


class_counts = st.integers(min_value=1, max_value=6)
# class indices a view must hold without costing their size: past uint8, uint16, the limit
LARGE_CLASSES = [0, 1, 255, 65_535, 100_000, MAX_CLASS]


@st.composite
def predictions_input(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(min_value=0, max_value=6))
    k = draw(class_counts)
    logits = draw(
        st.one_of(
            hnp.arrays(np.float64, (n, k), elements=st.floats(-50, 50)),
            hnp.arrays(np.float32, (n, draw(st.integers(0, 2))), elements=st.floats(-5, 5)),
            hnp.arrays(
                np.float64,
                (n,),
                elements=st.one_of(st.floats(allow_nan=True), st.integers(-3, 2**40)),
            ),
            hnp.arrays(np.int64, (n,), elements=st.integers(-3, 2**40)),
            hnp.arrays(np.int64, (n,), elements=st.sampled_from(LARGE_CLASSES)),
        )
    )
    labels = draw(
        st.one_of(
            hnp.arrays(np.int64, (draw(st.integers(n, n + 1)),), elements=st.integers(-2, k)),
            hnp.arrays(np.float64, (n,), elements=st.floats(allow_nan=True)),
            hnp.arrays(np.uint64, (n,), elements=st.integers(0, 2**64 - 1)),
            hnp.arrays(np.int64, (n,), elements=st.sampled_from(LARGE_CLASSES)),
        )
    )
    ids = draw(
        st.one_of(
            st.none(),
            hnp.arrays(np.uint64, (n,), elements=st.integers(0, 2**64 - 1), unique=True),
            hnp.arrays(np.int64, (n,), elements=st.integers(-1, 2**54), unique=True),
        )
    )
    split = draw(st.one_of(texts, st.just("val"), st.integers()))
    return {"logits": logits, "labels": labels, "ids": ids, "split": split}


@given(step=steps, args=predictions_input())
def test_log_predictions_reads_back_what_it_accepts(step: Any, args: dict[str, Any]) -> None:
    with _fresh() as run:
        try:
            run.log_predictions(step, args["logits"], args["labels"], args["ids"], args["split"])
        except REFUSED as exc:
            _refused_clearly(exc, "log_predictions:")
            run.flush()
            return
        run.flush()
        frame = run.predictions(int(step), split=args["split"])
        n = len(args["logits"])
        ids = np.arange(n) if args["ids"] is None else np.asarray(args["ids"]).astype(np.int64)
        order = np.argsort(ids)
        assert frame["id"].tolist() == ids[order].tolist()
        assert frame["label"].tolist() == np.asarray(args["labels"])[order].astype(int).tolist()
        preds = frame["pred"].to_numpy()
        assert ((preds >= 0) & (preds <= MAX_CLASS)).all()
        if args["logits"].ndim == 1:
            assert preds.tolist() == args["logits"][order].astype(int).tolist()


@given(
    step=steps,
    features=st.one_of(
        hnp.arrays(
            np.float64,
            hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4),
            elements=st.floats(allow_nan=True, allow_infinity=True),
        ),
        hnp.arrays(np.int32, hnp.array_shapes(max_dims=2, max_side=4)),
    ),
    layer=st.one_of(st.none(), texts),
)
def test_log_embeddings_reads_back_what_it_accepts(step: Any, features: Any, layer: Any) -> None:
    with _fresh() as run:
        try:
            run.log_embeddings(step, features, layer=layer)
        except REFUSED as exc:
            _refused_clearly(exc, "log_embeddings:")
            return
        ids, matrix = run.embeddings(int(step), layer=layer or None)
        expected = np.asarray(features, dtype=np.float32).reshape(len(features), -1)
        assert ids.tolist() == list(range(len(features)))
        np.testing.assert_array_equal(matrix, expected)


@given(
    data=st.one_of(
        st.lists(texts, min_size=1, max_size=4),
        hnp.arrays(np.uint8, hnp.array_shapes(min_dims=3, max_dims=3, min_side=0, max_side=5)),
        hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=2, max_side=4)),
        st.lists(st.dictionaries(texts, st.one_of(texts, st.floats())), min_size=1, max_size=3),
    ),
    split=st.one_of(texts, st.just("val")),
)
def test_log_samples_reads_back_what_it_accepts(data: Any, split: Any) -> None:
    with _fresh() as run:
        try:
            run.log_samples(data, split=split)
        except REFUSED as exc:
            _refused_clearly(exc, "log_samples:", "class_names")
            return
        frame = run.samples(split=split)
        assert len(frame) == len(data)
        if isinstance(data, list) and data and isinstance(data[0], str):
            assert frame["text"].tolist() == data


# -- read methods -----------------------------------------------------------------------------

anything = st.one_of(
    steps,
    texts,
    st.lists(st.one_of(st.integers(-1, 2**70), texts, st.floats()), max_size=3),
    st.tuples(st.integers(-(2**70), 2**70), st.integers(-(2**70), 2**70)),
    st.dictionaries(texts, st.integers(-(2**70), 2**70), max_size=2),
    st.sampled_from(["activation", "weight", "val", "conv1", "loss"]),
)

READS = [
    ("scalars", 1),
    ("scalars_after", 1),
    ("steps", 1),
    ("stats", 3),
    ("stats_at", 2),
    ("histogram", 3),
    ("histogram_steps", 2),
    ("histogram_rows", 3),
    ("histograms_at", 2),
    ("unit_stats", 3),
    ("events", 1),
    ("prediction_steps", 1),
    ("predictions", 2),
    ("probabilities", 2),
    ("sample_ids", 1),
    ("samples", 2),
    ("captured_ids", 1),
    ("capture_steps", 2),
    ("captures", 3),
    ("embedding_layers", 2),
    ("embedding_steps", 3),
    ("embeddings", 3),
    ("projection", 1),
    ("profiles", 1),
    ("profile_steps", 1),
    ("load_profile", 2),
    ("profile_trace", 2),
    ("attention_layers", 1),
    ("attention_steps", 2),
    ("attention", 3),
    ("attention_stats", 2),
    ("meta", 1),
    ("recorded_layers", 2),
    ("splits", 1),
]


@pytest.fixture(scope="module")
def demo(demo_run_path: Path):
    run = nbviz.open_run(demo_run_path)
    yield run
    run.close()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(read=st.sampled_from(READS), data=st.data())
def test_read_methods_return_or_refuse_clearly(demo, read: tuple[str, int], data) -> None:
    name, arity = read
    args = [data.draw(anything) for _ in range(data.draw(st.integers(0, arity)))]
    try:
        getattr(demo, name)(*args)
    except (TypeError, ValueError, KeyError, RunFileError) as exc:
        assume(True)
        assert type(exc).__module__.split(".")[0] in ("builtins", "nbviz"), repr(exc)
        assert str(exc), repr(exc)


# -- the views on what was accepted ------------------------------------------------------------

write_calls = st.lists(
    st.one_of(
        st.tuples(st.just("log"), steps, texts, numbers),
        st.tuples(st.just("log_predictions"), steps, predictions_input()),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=max(5, settings().max_examples // 6))
@given(calls=write_calls)
def test_every_view_builds_on_whatever_was_accepted(calls: list[tuple]) -> None:
    from nbviz.widgets.dashboard import Dashboard

    with _fresh() as run:
        for call in calls:
            try:
                if call[0] == "log":
                    run.log(call[1], {call[2]: call[3]})
                else:
                    a = call[2]
                    run.log_predictions(call[1], a["logits"], a["labels"], a["ids"], a["split"])
            except REFUSED:
                continue
        run.flush()
        dash = Dashboard(run, live=False)
        try:
            for view in dash.views.values():
                assert not getattr(view, "error", ""), (type(view).__name__, view.error)
        finally:
            dash.close()
