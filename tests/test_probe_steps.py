"""How a probe counts steps and names layers: the loop's own numbers, eval passes left
out, gradient accumulation, and several models (or a model rebuilt) in one run."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from training import mlp, random_batches, sgd_step

import nbviz


def test_eval_passes_do_not_count_as_training_steps(tmp_path):
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=1)
        for step, (x, y) in enumerate(random_batches(4)):
            sgd_step(model, opt, x, y)
            run.log(step, train_loss=1.0)
            with torch.no_grad():
                model(torch.full((64, 12), 100.0))  # would dominate the stats if recorded
            model.eval()
            model(torch.full((64, 12), 100.0))
            model.train()
        probe.close()
        stats = run.stats("activation", layer="0")
    assert probe.steps_seen == 4
    assert list(stats["step"]) == [0, 1, 2, 3]
    assert (stats["count"] == 8 * 32).all()
    assert (stats["max"] < 50).all()


def test_steps_follow_the_numbers_given_to_log(tmp_path):
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=10)
        for step, (x, y) in zip(range(100, 135), random_batches(35), strict=False):
            sgd_step(model, opt, x, y)
            run.log(step, train_loss=1.0)
        run.flush()
        assert list(run.steps("activation")) == [100, 110, 120, 130]
        assert list(run.steps("weight")) == [100, 110, 120, 130]


def test_gradient_accumulation_counts_optimizer_steps(tmp_path):
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with nbviz.Run(tmp_path / "run") as run:
        probe = run.watch(model, every=1, optimizer=opt)
        data = list(random_batches(12))
        for step in range(4):
            opt.zero_grad()
            for x, y in data[3 * step : 3 * step + 3]:  # 3 micro-batches per step
                nn.functional.cross_entropy(model(x), y).backward()
                run.flush()  # a flush between micro-batches ends no step
            opt.step()
            run.log(step, train_loss=1.0)
        probe.close()
        act = run.stats("activation", layer="0")
        grad = run.stats("gradient", layer="0.weight")
    assert list(act["step"]) == [0, 1, 2, 3]
    assert (act["count"] == 3 * 8 * 32).all()  # the three micro-batches together
    assert list(grad["step"]) == [0, 1, 2, 3]


def test_logged_numbers_take_over_from_an_extra_training_pass(tmp_path):
    """One forward and backward outside the loop (a check that backward works) puts
    the probe's count one ahead; the loop's logs bring the numbers back."""
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    weights = {}
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, every=5, hist_every=5)
        check = nn.functional.cross_entropy(model(torch.randn(4, 12)), torch.tensor([0, 1, 2, 3]))
        check.backward()
        opt.zero_grad()
        for step, (x, y) in enumerate(random_batches(11)):
            sgd_step(model, opt, x, y)
            run.log(step, train_loss=1.0)
            weights[step] = float(model[0].weight.detach().norm())
        run.flush()
        recorded = run.stats("weight", layer="0.weight").set_index("step")["norm"]
    assert recorded[5] == pytest.approx(weights[5], rel=1e-6)
    assert recorded[10] == pytest.approx(weights[10], rel=1e-6)


def test_watching_twice_is_an_error_unless_replaced(tmp_path):
    model = mlp()
    with nbviz.Run(tmp_path / "run") as run:
        first = run.watch(model)
        with pytest.raises(RuntimeError, match="already watched"):
            run.watch(model)
        second = run.watch(model, replace=True)
        assert first.closed and not second.closed


@pytest.mark.parametrize("logs", ["at_the_end", "after_each_update", "twice_at_the_end"])
def test_two_models_in_one_run_are_told_apart_by_name(tmp_path, logs):
    """A GAN: generator and discriminator watched in one run, each under its name."""
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
    disc = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    opt_g, opt_d = torch.optim.Adam(gen.parameters()), torch.optim.Adam(disc.parameters())
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(gen)
        with pytest.raises(ValueError, match="already watches a Sequential under no name.*name="):
            run.watch(disc)
        with pytest.raises(ValueError, match="name must be a non-empty string.*got '.D'"):
            run.watch(disc, name=".D")
        run.watch(gen, name="G", replace=True, every=5, hist_every=5, optimizer=opt_g)
        run.watch(disc, name="D", every=5, hist_every=5, optimizer=opt_d)
        seen = {}  # per step: norms of what each optimizer applied, and the weights after
        for step in range(11):
            fake = gen(torch.randn(16, 4))
            opt_d.zero_grad()
            real_score, fake_score = disc(torch.randn(16, 8)), disc(fake.detach())
            d_loss = nn.functional.softplus(-real_score).mean()
            d_loss = d_loss + nn.functional.softplus(fake_score).mean()
            d_loss.backward()
            opt_d.step()
            if logs == "after_each_update":
                run.log(step, d_loss=d_loss)
            # the discriminator runs again, after its update and before the log
            opt_g.zero_grad()
            g_loss = nn.functional.softplus(-disc(fake)).mean()
            g_loss.backward()
            opt_g.step()
            if logs == "at_the_end":
                run.log(step, d_loss=d_loss, g_loss=g_loss)
            elif logs == "twice_at_the_end":
                run.log(step, d_loss=d_loss)
                run.log(step, g_loss=g_loss)
            else:
                run.log(step, g_loss=g_loss)
            seen[step] = {
                "D.0.weight": float(disc[0].weight.detach().norm()),
                "G.0.weight": float(gen[0].weight.detach().norm()),
                "G.0.weight grad": float(gen[0].weight.grad.norm()),
            }
        run.flush()
        activations = run.stats("activation")
        weights = set(run.stats("weight")["layer"])
        d_weight = run.stats("weight", layer="D.0.weight").set_index("step")["norm"]
        g_weight = run.stats("weight", layer="G.0.weight").set_index("step")["norm"]
        g_grad = run.stats("gradient", layer="G.0.weight").set_index("step")["norm"]
        layers = run.layers()
        probe_meta, model_meta = run.meta("probe"), run.meta("model")
    expected = {f"{m}.{i}" for m in "GD" for i in range(3)}
    assert set(activations["layer"]) == expected
    # each probe counts its own optimizer's steps: captures at the steps the loop logs
    assert sorted(set(activations["step"])) == [0, 5, 10]
    # step k holds iteration k's update of each model (the log names the step just ended)
    for k in (0, 5, 10):
        assert d_weight[k] == pytest.approx(seen[k]["D.0.weight"], rel=1e-6)
        assert g_weight[k] == pytest.approx(seen[k]["G.0.weight"], rel=1e-6)
        assert g_grad[k] == pytest.approx(seen[k]["G.0.weight grad"], rel=1e-6)
    assert {"G.0.weight", "G.2.bias", "D.0.weight", "D.2.bias"} <= weights
    assert set(layers["name"]) == expected and set(layers["depth"]) == {1}
    assert layers.set_index("name").loc["D.1", "type"] == "LeakyReLU"
    assert [p["name"] for p in probe_meta["probes"]] == ["G", "D"]
    assert {p["name"] for p in probe_meta["params"]} >= {"G.0.weight", "D.0.weight"}
    assert model_meta["params"] == sum(p.numel() for p in [*gen.parameters(), *disc.parameters()])


def test_evaluate_names_layers_as_the_models_probe_does(tmp_path):
    torch.manual_seed(0)
    model = mlp()
    x, y = torch.randn(40, 12), torch.randint(0, 5, (40,))
    with nbviz.Run(tmp_path / "run") as run:
        run.watch(model, name="net")
        run.evaluate(0, model, [(x, y)], units_layer="1")
        run.evaluate(0, model, [(x, y)], units_layer="net.3", split="test")  # as views name it
        run.capture(model, x[0], id=3)
        run.flush()
        embeddings = run.embedding_layers("val", kind="embedding")
        units = run.embedding_layers("val", kind="units")
        test_units = run.embedding_layers("test", kind="units")
        captured = list(run.captures(3, "val", 0)["layer"])
    # the embedding is the input of the last Linear ("4"); the units those of the ReLU
    assert (embeddings, units, test_units) == (["net.4"], ["net.1"], ["net.3"])
    assert captured == [f"net.{i}" for i in range(5)]
