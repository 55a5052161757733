"""The profiler: a training step's time attributed to the model's own modules, stored in a run."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import nn

import nbviz
from nbviz.analysis.profile import BREAKDOWN, MODULE_COLUMNS, OPERATOR_COLUMNS, Profile
from nbviz.probes.native_stderr import is_profiler_line
from nbviz.probes.profile import FORWARD_PREFIX, profile_step

# short schedules on purpose: torch's warning about skipping warmup is expected here
pytestmark = pytest.mark.filterwarnings("ignore:Profiler won't be using warmup")


class SlowMatmul(nn.Module):
    """A deliberately slow module: a chain of large matrix products."""

    def __init__(self, width: int, repeats: int = 6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(width, width) / width**0.5)
        self.repeats = repeats

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.repeats):
            x = x @ self.weight
        return x


class Net(nn.Module):
    def __init__(self, width: int = 384) -> None:
        super().__init__()
        self.inp = nn.Linear(16, width)
        self.act = nn.ReLU(inplace=True)  # in place: backward hooks on modules would break it
        self.slow = SlowMatmul(width)
        self.head = nn.Sequential(nn.Linear(width, 32), nn.Tanh(), nn.Linear(32, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.slow(self.act(self.inp(x))))


def make_step(model: nn.Module, batch: int = 128):
    torch.manual_seed(0)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(batch, 16), torch.randint(0, 4, (batch,))

    def step() -> None:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return step


@pytest.fixture(scope="module")
def captured() -> tuple[Net, Profile]:
    torch.manual_seed(0)
    model = Net()
    return model, profile_step(model, make_step(model), steps=4, warmup=1, wait=1, baseline=3)


def test_slow_module_is_ranked_first(captured: tuple[Net, Profile]) -> None:
    _, prof = captured
    table = prof.modules()
    assert list(table.columns) == list(MODULE_COLUMNS)
    assert table.iloc[0]["name"] == "slow"
    assert table.iloc[0]["type"] == "SlowMatmul"
    slow = table.set_index("name").loc["slow"]
    assert slow["pct"] > 40, slow
    assert slow["input_shapes"] == [[[128, 384]]]
    assert slow["calls"] == 1
    # the root holds its children; self excludes them
    root = table.set_index("name").loc[""]
    assert root["total_ms"] >= slow["total_ms"]
    assert root["self_ms"] < slow["self_ms"]


def test_forward_and_backward_are_both_attributed(captured: tuple[Net, Profile]) -> None:
    _, prof = captured
    rows = prof.modules().set_index("name")
    for name in ("slow", "inp", "head", "head.0"):
        assert rows.loc[name, "forward_ms"] > 0, name
        assert rows.loc[name, "backward_ms"] > 0, name
    # the first layer's weight gradient counts although its input needs no gradient
    assert rows.loc["inp", "backward_self_ms"] > 0
    # subtree totals: head's backward holds its children's
    children = rows.loc[["head.0", "head.1", "head.2"], "backward_ms"].sum()
    assert rows.loc["head", "backward_ms"] == pytest.approx(children, rel=1e-6)
    parts = prof.breakdown()
    assert parts["forward"] > 0 and parts["backward"] > 0 and parts["optimizer"] > 0
    assert parts["backward"] >= 0.9 * rows.loc["", "backward_ms"]


def test_breakdown_adds_up_to_the_measured_step_time(captured: tuple[Net, Profile]) -> None:
    _, prof = captured
    parts = prof.breakdown()
    assert list(parts.index) == list(BREAKDOWN)
    assert (parts >= 0).all()
    measured = prof.payload["wall_ms"]  # perf_counter around each profiled step
    assert len(measured) == 4
    for each, wall in zip(prof.payload["breakdown_each"], measured):
        assert sum(each.values()) == pytest.approx(wall, rel=0.10)
    assert parts.sum() == pytest.approx(sum(measured) / len(measured), rel=0.10)
    assert parts["other"] < 0.25 * parts.sum()


def test_overhead_is_measured_and_stated(captured: tuple[Net, Profile]) -> None:
    _, prof = captured
    overhead = prof.overhead
    assert overhead is not None and overhead["steps"] == 3
    assert overhead["baseline_ms"] > 0 and overhead["profiled_ms"] > 0
    assert overhead["ratio"] == pytest.approx(overhead["profiled_ms"] / overhead["baseline_ms"])
    assert "profiler overhead" in prof.summary()
    # two different step times, each saying what it is
    assert f"(the mean of {len(prof.payload['step_ms_each'])} profiled steps)" in prof.summary()
    assert "the median wall-clock time of 3 steps each" in prof.summary()


def test_top_operators_put_matmul_first(captured: tuple[Net, Profile]) -> None:
    _, prof = captured
    ops = prof.operators()
    assert list(ops.columns) == list(OPERATOR_COLUMNS)
    assert ops.iloc[0]["name"] == "aten::mm"
    assert ops.iloc[0]["calls"] >= 6  # six products forward, more backward
    assert not ops["name"].str.startswith(FORWARD_PREFIX).any()


def test_chrome_trace_is_valid_json_with_the_expected_events(
    captured: tuple[Net, Profile], tmp_path: Path
) -> None:
    _, prof = captured
    path = prof.export_chrome_trace(tmp_path / "trace.json")
    trace = json.loads(path.read_text())
    names = [e.get("name", "") for e in trace["traceEvents"]]
    assert sum(n.startswith("ProfilerStep#") for n in names) == 4
    assert f"{FORWARD_PREFIX}slow" in names
    assert "aten::mm" in names
    assert any(n.startswith("Optimizer.step#SGD.step") for n in names)
    assert any(n.startswith("autograd::engine::evaluate_function: MmBackward0") for n in names)
    labelled = [e for e in trace["traceEvents"] if e.get("name") == "nbviz.backward slow"]
    assert labelled and all(e["ph"] == "X" and e["dur"] >= 0 for e in labelled)
    steps = [e for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
    lo = min(e["ts"] for e in steps)
    hi = max(e["ts"] + e["dur"] for e in steps)
    assert all(lo <= e["ts"] <= hi for e in labelled)  # on the trace's own clock


def test_hooks_are_removed_and_training_is_unchanged() -> None:
    torch.manual_seed(1)
    a = Net(width=64)
    b = Net(width=64)
    b.load_state_dict(a.state_dict())
    step_a, step_b = make_step(a, 32), make_step(b, 32)
    profile_step(a, step_a, steps=2, warmup=0, wait=0, baseline=1, keep_trace=False)
    for _ in range(3):  # the same number of steps, unprofiled
        step_b()
    for m in a.modules():
        assert not m._forward_pre_hooks and not m._forward_hooks
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(pa, pb), name


def test_data_loading_counts_as_data() -> None:
    import time

    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def batch() -> torch.Tensor:
        time.sleep(0.004)
        return torch.randn(16, 8)

    def step(x: torch.Tensor) -> None:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()

    prof = profile_step(model, step, data=batch, steps=3, warmup=0, wait=0, baseline=0)
    assert prof.breakdown()["data"] >= 3.5
    assert prof.overhead is None
    loader = torch.utils.data.DataLoader(torch.randn(20, 8), batch_size=8)
    prof = profile_step(model, step, data=loader, steps=4, warmup=0, wait=0, baseline=0)
    assert prof.breakdown()["data"] > 0


def test_a_failing_step_leaves_no_hooks() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(5, 2))

    def step() -> None:
        model(torch.randn(2, 4)).sum().backward()

    with pytest.raises(RuntimeError, match="shapes"):
        profile_step(model, step, steps=1, warmup=0, wait=0)
    assert all(not m._forward_pre_hooks and not m._forward_hooks for m in model.modules())


def test_the_profilers_own_log_lines_stay_out_of_stderr_and_real_ones_stay(
    capfd: pytest.CaptureFixture[str],
) -> None:
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step() -> None:
        opt.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
        os.write(2, b"a real native warning from the step\n")  # below Python, as C++ writes

    profile_step(model, step, steps=2, warmup=1, wait=1, baseline=0)
    err = capfd.readouterr().err
    assert "profiler_start" not in err and "Memory block of unknown size" not in err, err
    assert err.count("a real native warning from the step") == 4  # wait + warmup + steps
    os.write(2, b"after\n")  # descriptor 2 is back where it was
    assert capfd.readouterr().err == "after\n"


def test_profiler_lines_are_told_from_other_native_lines() -> None:
    ours = [
        "USDT:2026-12-06 04:28:01 15979:15979 SyncActivityProfilerHandler.cpp:52] profiler_start",
        "[W1206 04:28:01.577566595 CPUAllocator.cpp:245] Memory block of unknown size was "
        "allocated before the profiling started, profiler results will not include the "
        "deallocation event",
        "STAGE:2024-01-01 00:00:00 1:1 ActivityProfilerController.cpp:314] Completed Stage: "
        "Warm Up",
    ]
    assert all(is_profiler_line(line) for line in ours)
    assert not is_profiler_line("[W1206 Conv.cpp:10] Warning: an input was not contiguous")
    assert not is_profiler_line("RuntimeError: the profiler failed")  # not a native log line


def test_bad_arguments_are_named() -> None:
    model = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="steps must be an integer >= 1, got 0"):
        profile_step(model, lambda: None, steps=0)
    with pytest.raises(TypeError, match="step_fn must be callable"):
        profile_step(model, "step")
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        profile_step(object(), lambda: None)


def trained_run(path: Path, width: int, batch: int, steps: int) -> tuple[Net, Callable, nbviz.Run]:
    """A Net trained ``steps`` steps into a run at ``path`` (a falling loss logged)."""
    torch.manual_seed(0)
    model = Net(width=width)
    step = make_step(model, batch)
    run = nbviz.Run(path)
    for s in range(steps):
        step()
        run.log(s, train_loss=1.0 / (s + 1))
    return model, step, run


def test_profile_is_stored_in_the_run_and_read_back_after_reopening(tmp_path: Path) -> None:
    model, step, run = trained_run(tmp_path / "run", width=384, batch=128, steps=3)
    result = run.profile(model, step, steps=2, warmup=0, wait=0, baseline=1)
    assert result.step == 2  # the last logged step
    run.profile(model, step, step=7, steps=2, warmup=0, wait=0, baseline=0, keep_trace=False)
    run.close()

    view = nbviz.open_run(tmp_path / "run")
    assert list(view.profile_steps()) == [2, 7]
    assert list(view.profiles()["name"]) == ["profile", "profile"]  # traces left out
    stored = Profile.from_run(view, step=2)
    assert stored.payload == result.payload
    assert stored.modules().iloc[0]["name"] == "slow"
    assert json.loads(stored.trace)["traceEvents"]
    latest = Profile.from_run(view)
    assert latest.step == 7 and latest.trace is None
    with pytest.raises(ValueError, match="no trace"):
        latest.export_chrome_trace(tmp_path / "t.json")
    with pytest.raises(KeyError, match="profiles are stored at: 2, 7"):
        view.load_profile(3)
    view.close()


def test_profiler_widget_shows_what_was_stored(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Net(width=192)
    step = make_step(model, 64)
    run = nbviz.Run(tmp_path / "run")
    run.log(0, train_loss=1.0)
    w = nbviz.Profiler(model, step, steps=2, warmup=0, wait=1, run=run, step=5, baseline=1)
    state = w.get_state()
    assert state["profile"]["step"] == 5 and state["profile_steps"] == [5]
    assert state["profile"] == run.load_profile(5)
    assert "profiler overhead" in state["overhead"]
    # the table is the stored profile's, in its order (which module is slowest in a
    # small model depends on the machine's load at the moment: the module tests rank it)
    shown = w.modules()["name"].tolist()
    assert shown == Profile.from_run(run, step=5).modules()["name"].tolist()
    assert "slow" in shown
    w.set_state({"zoom": "head"})
    assert w.zoom == "head"
    with pytest.raises(Exception, match="no module 'nope'"):
        w.zoom = "nope"
    run.profile(model, step, step=9, steps=2, warmup=0, wait=0, baseline=0)
    w.close()
    run.close()

    # after a restart: the run alone shows its profiles; step picks one
    view = nbviz.Profiler(nbviz.open_run(tmp_path / "run"), live=False)
    assert view.profile["step"] == 9 and view.profile_steps == [5, 9]
    view.step = 6
    assert view.profile["step"] == 5 and "latest at or before step 6" in view.notice
    view.step = 2
    assert view.profile["step"] == 5 and "first after" in view.notice
    assert view.export_chrome_trace(tmp_path / "t.json").stat().st_size > 0
    view.close()


def test_profiler_widget_without_a_run_and_empty_run(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    w = nbviz.Profiler(
        model, lambda: model(torch.randn(8, 4)).sum().backward(), steps=2, warmup=0, wait=0
    )
    assert w.profile["modules"] and w.result is not None
    assert set(w.breakdown().index) == set(BREAKDOWN)
    empty = nbviz.Run(tmp_path / "empty")
    view = nbviz.Profiler(empty, live=False)
    assert "No profile stored" in view.empty and view.profile == {}
    with pytest.raises(TypeError, match="step_fn must be a callable"):
        nbviz.Profiler(model)
    empty.close()


def test_dashboard_shows_the_profile_at_the_scrubbed_step(tmp_path: Path) -> None:
    model, step, run = trained_run(tmp_path / "run", width=64, batch=16, steps=10)
    for at in (3, 8):
        run.profile(model, step, step=at, steps=1, warmup=0, wait=0, baseline=0)
    dash = nbviz.Dashboard(run, live=False)
    prof = dash.profiler
    assert prof is not None and prof.step == dash.scrubber.step
    assert any(
        link.source[0] is dash.scrubber and link.target[0] is prof and link.target[1] == "step"
        for link in dash.links
    )
    prof.step = 5  # what the browser-side link does when the scrubber moves
    assert prof.profile["step"] == 3
    prof.step = 9
    assert prof.profile["step"] == 8
    dash.close()
    run.close()
