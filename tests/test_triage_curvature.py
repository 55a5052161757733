"""The curvature test: power iteration on Hessian-vector products against the exact Hessian,
the optimizers' stability limits, and run.curvature() leaving training as it was.

Also the optimizer's parameter groups that ``watch(..., optimizer=)`` records at
capture steps, which the learning-rate checks read when the loop logs no lr.
"""

from __future__ import annotations

from collections import OrderedDict

import pytest
import torch
from torch import nn

import nbviz
from nbviz.analysis.checks.optimizer import lr_series, optimizer_groups
from nbviz.probes.curvature import curvature, stability, top_eigenvalue


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(OrderedDict(fc1=nn.Linear(3, 4), act=nn.Tanh(), fc2=nn.Linear(4, 2)))
    return model, torch.randn(16, 3), torch.randint(0, 2, (16,))


def exact_hessian(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The full Hessian of the cross-entropy in the flattened parameters (22 x 22)."""
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for p in model.parameters()]
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    def loss_of(v: torch.Tensor) -> torch.Tensor:
        params, i = {}, 0
        for name, shape in zip(names, shapes, strict=True):
            n = shape.numel()
            params[name] = v[i : i + n].reshape(shape)
            i += n
        out = torch.func.functional_call(model, params, (x,))
        return nn.functional.cross_entropy(out, y)

    return torch.autograd.functional.hessian(loss_of, flat).double()


def test_the_sharpness_is_the_exact_hessians_top_eigenvalue(capsys):
    model, x, y = tiny()
    exact = float(torch.linalg.eigvalsh(exact_hessian(model, x, y))[-1])
    found = curvature(model, lambda: nn.functional.cross_entropy(model(x), y), tol=1e-7)
    with capsys.disabled():
        print(f"\n  sharpness {found.sharpness:.6f} vs exact top eigenvalue {exact:.6f}")
    assert found.converged and found.sharpness == pytest.approx(exact, rel=1e-4)
    assert found.limit is None and not found.preconditioned  # no optimizer: no limit


def test_adams_preconditioned_sharpness_matches_the_exact_preconditioned_hessian(capsys):
    model, x, y = tiny()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(5):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    d = []
    for p in model.parameters():
        state = opt.state[p]
        v_hat = state["exp_avg_sq"] / (1 - 0.999 ** float(state["step"]))
        d.append((1 / (v_hat.sqrt() + 1e-8)).reshape(-1))
    root = torch.cat(d).double().sqrt()
    h = exact_hessian(model, x, y)
    exact = float(torch.linalg.eigvalsh(root[:, None] * h * root[None, :])[-1])
    found = curvature(
        model, lambda: nn.functional.cross_entropy(model(x), y), optimizer=opt, tol=1e-7
    )
    with capsys.disabled():
        print(f"\n  preconditioned sharpness {found.sharpness:.4f} vs exact {exact:.4f}")
    assert found.preconditioned and found.kind == "adam"
    assert found.sharpness == pytest.approx(exact, rel=1e-4)
    assert found.limit == pytest.approx(38 / 1e-2)  # (2 + 2 beta1) / ((1 - beta1) lr)


def test_a_dominant_negative_eigenvalue_still_gives_the_largest_algebraic_one():
    matrix = torch.diag(torch.tensor([-5.0, 2.0, 0.5]))
    value, _, ok = top_eigenvalue(lambda v: [matrix @ v[0]], [torch.zeros(3)], tol=1e-6)
    assert ok and value == pytest.approx(2.0, rel=1e-5)


@pytest.mark.parametrize(
    ("make", "kind", "limit"),
    [
        (lambda p: torch.optim.SGD(p, lr=0.1), "gradient descent", 20.0),
        (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), "momentum", 38.0),
        (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True), "nesterov", 38 / 2.8),
        (lambda p: torch.optim.AdamW(p, lr=0.1, betas=(0.8, 0.99)), "adam", 3.6 / 0.02),
        (lambda p: torch.optim.RMSprop(p, lr=0.1), "rmsprop", 20.0),
        (lambda p: torch.optim.Adagrad(p, lr=0.1), "unknown", None),
    ],
)
def test_the_stability_limit_of_each_optimizer(make, kind, limit):
    info = stability(make(nn.Linear(2, 2).parameters()))
    assert info["kind"] == kind
    assert info["limit"] == (pytest.approx(limit) if limit is not None else None)


def test_run_curvature_stores_the_test_and_leaves_training_as_it_was(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(
        OrderedDict(
            fc1=nn.Linear(8, 16), bn=nn.BatchNorm1d(16), act=nn.ReLU(), drop=nn.Dropout(0.5),
            fc2=nn.Linear(16, 2),
        )
    )  # fmt: skip
    x, y = torch.randn(32, 8), torch.randint(0, 2, (32,))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=1, optimizer=opt)
        for step in range(3):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            run.log(step, train_loss=1.0)
        buffers = [b.clone() for b in model.buffers()]
        rng = torch.get_rng_state()
        found = run.curvature(model, (x, y), nn.functional.cross_entropy)
        assert torch.equal(torch.get_rng_state(), rng)  # dropout's randomness untouched
        assert all(torch.equal(a, b) for a, b in zip(buffers, model.buffers(), strict=True))
        assert found.kind == "momentum" and found.limit == pytest.approx(38.0)
        # the test was no training step: the next one is step 3, and the hooks still record
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        run.log(3, train_loss=1.0)
        run.flush()
        assert probe.captures == 4 and list(run.steps("activation")) == [0, 1, 2, 3]
        stored = run.scalars(["sharpness", "stability_limit"]).set_index("name")
        assert stored.loc["sharpness", "step"] == 2
        assert stored.loc["sharpness", "value"] == pytest.approx(found.sharpness)
        assert stored.loc["stability_limit", "value"] == pytest.approx(38.0)
        assert run.meta("curvature")["iterations"] == found.iterations


def test_run_curvature_says_what_it_needs(tmp_path):
    model, x, y = tiny()
    with nbviz.Run(tmp_path / "run") as run:
        with pytest.raises(ValueError, match=r"batch must be \(inputs, targets\)"):
            run.curvature(model, x, nn.functional.cross_entropy)
        with pytest.raises(ValueError, match="single-element tensor"):
            run.curvature(model, (x, y), lambda out, t: out)
        with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
            run.curvature("model", (x, y), nn.functional.cross_entropy)


def test_watching_with_the_optimizer_records_its_groups_at_capture_steps(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(OrderedDict(fc1=nn.Linear(4, 8), act=nn.ReLU(), fc2=nn.Linear(8, 2)))
    opt = torch.optim.SGD(
        [{"params": model.fc1.parameters(), "lr": 0.5}, {"params": model.fc2.parameters()}],
        lr=0.1,
        momentum=0.9,
    )
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.1)
    x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=5, optimizer=opt)
        for step in range(11):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            sched.step()
            run.log(step, train_loss=1.0)
    with nbviz.open_run(tmp_path / "run") as run:
        lr = run.scalars("optimizer/lr").set_index("step")["value"]
        # the lr each capture step's update used (before the scheduler stepped after it)
        assert list(lr.index) == [0, 5, 10]
        assert lr.loc[0] == pytest.approx(0.5) and lr.loc[5] == pytest.approx(0.05)
        assert run.scalars("optimizer/lr/1")["value"].iloc[0] == pytest.approx(0.1)
        groups = optimizer_groups(run)
        assert [g["momentum"] for g in groups] == [0.9, 0.9] and groups[0]["type"] == "SGD"
        assert lr_series(run)[0] == "optimizer/lr"  # the diagnosis reads it with no lr logged
