"""NbvizLogger and NbvizCallback in a real Lightning Trainer: a small classifier on CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

L = pytest.importorskip("lightning")
torch = pytest.importorskip("torch")
from lightning.pytorch.loggers import Logger  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import nbviz  # noqa: E402
from nbviz.integrations.lightning import NbvizCallback, NbvizLogger  # noqa: E402

pytestmark = pytest.mark.slow

N_TRAIN, N_VAL, BATCH, ACCUMULATE, EPOCHS, EVERY = 96, 24, 8, 2, 3, 2
STEPS_PER_EPOCH = N_TRAIN // BATCH // ACCUMULATE


def _data(n: int, seed: int) -> torch.utils.data.TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()  # three classes
    return torch.utils.data.TensorDataset(x, y)


class Classifier(L.LightningModule):
    def __init__(self, hidden: int = 16, lr: float = 0.1) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(8, hidden), nn.ReLU(), nn.Linear(hidden, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        self.log("global_step", float(self.global_step))  # the Trainer's count, as a value
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class Recorder(Logger):
    """What Lightning hands a logger, to compare with what the run holds."""

    def __init__(self) -> None:
        super().__init__()
        self.metrics: list[tuple[int, dict]] = []

    name = "recorder"
    version = "0"

    def log_metrics(self, metrics, step=None):
        self.metrics.append((step, dict(metrics)))

    def log_hyperparams(self, params, *args, **kwargs):
        pass


class WeightsAfterEachStep(L.Callback):
    """The norm of net.0.weight after each optimizer step, keyed by the step loggers see."""

    def __init__(self) -> None:
        self.norms: dict[int, float] = {}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if (batch_idx + 1) % ACCUMULATE == 0:
            step = trainer.fit_loop.epoch_loop._batches_that_stepped
            self.norms[step] = float(pl_module.net[0].weight.detach().norm())


def _trainer(logger, callbacks, **kw) -> L.Trainer:
    options = {
        "max_epochs": EPOCHS,
        "accelerator": "cpu",
        "devices": 1,
        "log_every_n_steps": 2,
        "accumulate_grad_batches": ACCUMULATE,
        "enable_progress_bar": False,
        "enable_checkpointing": False,
        "enable_model_summary": False,
    }
    return L.Trainer(logger=logger, callbacks=callbacks, **{**options, **kw})


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pl")
    L.seed_everything(0, verbose=False)
    recorder, weights = Recorder(), WeightsAfterEachStep()
    model = Classifier()
    trainer = _trainer([NbvizLogger(tmp / "run"), recorder], [NbvizCallback(every=EVERY), weights])
    val = _data(N_VAL, 1)
    trainer.fit(
        model,
        torch.utils.data.DataLoader(_data(N_TRAIN, 0), batch_size=BATCH, shuffle=True),
        torch.utils.data.DataLoader(val, batch_size=BATCH),
    )
    return {
        "run": nbviz.open_run(tmp / "run"),
        "trainer": trainer,
        "recorder": recorder,
        "weights": weights,
        "model": model,
        "val": val,
    }


def _recorded(recorder: Recorder, name: str) -> list[tuple[int, float]]:
    return [(s, float(m[name])) for s, m in recorder.metrics if name in m]


def test_logged_values_are_at_the_steps_lightning_hands_its_loggers(fitted):
    run, recorder = fitted["run"], fitted["recorder"]
    for name in ("train_loss", "val_loss", "val_acc"):
        expected = _recorded(recorder, name)
        assert expected, name
        frame = run.scalars(name)
        assert frame["step"].tolist() == [s for s, _ in expected], name
        assert frame["value"].tolist() == pytest.approx([v for _, v in expected]), name
    assert fitted["trainer"].global_step == EPOCHS * STEPS_PER_EPOCH


def test_the_probe_captures_optimizer_steps_numbered_as_the_logged_steps(fitted):
    """Accumulation 2: one step per optimizer step; step k's weights are those after update k."""
    run, norms = fitted["run"], fitted["weights"].norms
    total = EPOCHS * STEPS_PER_EPOCH
    expected = [s for s in range(total) if s % EVERY == 0]
    assert sorted(norms) == list(range(total))
    assert run.steps("gradient").tolist() == expected
    assert sorted(set(run.stats("gradient")["step"])) == expected
    # each logged step is the Trainer's global_step of the training_step that logged it
    logged = run.scalars("global_step")
    assert logged["step"].tolist() == logged["value"].astype(int).tolist()
    assert logged["step"].tolist() == run.scalars("train_loss")["step"].tolist()
    # the weights' own statistics come with the distributions (every 10th step here),
    # the update at each capture, divided by the weight norm of that step
    weights = run.stats("weight", layer="net.0.weight")
    assert weights["step"].tolist() == [s for s in expected if s % 10 == 0]
    for step, norm in zip(weights["step"], weights["norm"]):
        assert norm == pytest.approx(norms[int(step)], rel=1e-5), step
    updates = run.stats("update", layer="net.0.weight")
    assert updates["step"].tolist() == expected
    for step, size, rel in zip(updates["step"], updates["norm"], updates["rel"]):
        assert size / rel == pytest.approx(norms[int(step)], rel=1e-5), step


class CallsItsNet(Classifier):
    """A ``training_step`` that calls ``self.net(x)``, not ``self(x)``: the LightningModule's
    own forward (and its hooks) never runs in training."""

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss


def test_a_training_step_that_calls_a_submodule_is_captured_all_the_same(tmp_path):
    L.seed_everything(0, verbose=False)
    trainer = _trainer(NbvizLogger(tmp_path / "run"), [NbvizCallback(every=EVERY)])
    loader = torch.utils.data.DataLoader(_data(N_TRAIN, 0), batch_size=BATCH, shuffle=True)
    trainer.fit(CallsItsNet(), loader)
    run = nbviz.open_run(tmp_path / "run")
    expected = [s for s in range(EPOCHS * STEPS_PER_EPOCH) if s % EVERY == 0]
    assert run.steps("activation").tolist() == expected
    assert run.steps("gradient").tolist() == expected
    assert {"net.0", "net.1", "net.2"} <= set(run.stats("activation", steps=[0])["layer"])
    assert {"net.0", "net.0.weight"} <= set(run.stats("gradient", steps=[0])["layer"])


def test_hyperparameters_are_the_runs_config(fitted):
    assert fitted["run"].config == {"hidden": 16, "lr": 0.1}
    assert set(fitted["run"].layers()["name"]) >= {"net.0", "net.2"}


def test_each_validation_records_predictions_in_the_validation_sets_order(fitted):
    run, recorder, val = fitted["run"], fitted["recorder"], fitted["val"]
    val_steps = [s for s, _ in _recorded(recorder, "val_loss")]
    assert run.prediction_steps("val").tolist() == val_steps
    labels = val.tensors[1].tolist()
    for step, val_loss in _recorded(recorder, "val_loss"):
        preds = run.predictions(step=step, split="val")
        assert preds["id"].tolist() == list(range(N_VAL))
        assert preds["label"].tolist() == labels
        assert preds["loss"].mean() == pytest.approx(val_loss, rel=1e-5)
    model = fitted["model"].eval()
    with torch.no_grad():
        last = model(val.tensors[0]).argmax(1).tolist()
    assert run.predictions(split="val")["pred"].tolist() == last


def test_embeddings_and_samples_come_with_the_predictions(fitted):
    run, val = fitted["run"], fitted["val"]
    step = int(run.prediction_steps("val")[-1])
    ids, matrix = run.embeddings(step, split="val")
    assert ids.tolist() == list(range(N_VAL)) and matrix.shape == (N_VAL, 16)
    samples = run.samples(split="val")
    assert samples["id"].tolist() == list(range(N_VAL))
    assert samples["label"].tolist() == val.tensors[1].tolist()


def test_logits_returned_by_validation_step_are_used_when_forward_is_not(tmp_path):
    class Wrapped(Classifier):
        def validation_step(self, batch, batch_idx):
            x, y = batch
            logits = self.net(x)  # not self(x): the module's own forward is not called
            self.log("val_loss", F.cross_entropy(logits, y))
            return {"logits": logits, "labels": y}

    trainer = _trainer(NbvizLogger(tmp_path / "run"), [NbvizCallback(every=EVERY)], max_epochs=1)
    trainer.fit(
        Wrapped(),
        torch.utils.data.DataLoader(_data(32, 0), batch_size=BATCH),
        torch.utils.data.DataLoader(_data(16, 1), batch_size=BATCH),
    )
    preds = nbviz.open_run(tmp_path / "run").predictions(split="val")
    assert preds["id"].tolist() == list(range(16))
    assert preds["label"].tolist() == _data(16, 1).tensors[1].tolist()


def test_the_callback_needs_a_logger_or_a_path(tmp_path):
    trainer = _trainer(False, [NbvizCallback()], max_epochs=1)
    with pytest.raises(ValueError, match="no NbvizLogger"):
        trainer.fit(Classifier(), torch.utils.data.DataLoader(_data(16, 0), batch_size=BATCH))


def test_the_callback_alone_writes_its_own_run(tmp_path):
    trainer = _trainer(False, [NbvizCallback(tmp_path / "run", every=1)], max_epochs=1)
    trainer.fit(Classifier(), torch.utils.data.DataLoader(_data(32, 0), batch_size=BATCH))
    assert nbviz.open_run(tmp_path / "run").steps("gradient").tolist() == [0, 1]


def test_unknown_watch_options_are_refused_at_once():
    with pytest.raises(TypeError, match="unknown option.*evry"):
        NbvizCallback(evry=10)


def test_without_lightning_the_import_names_the_extra():
    code = (
        "import sys; sys.modules['lightning'] = None\n"
        "try:\n    import nbviz.integrations.lightning\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ
    ).stdout
    assert "pip install 'nbviz[lightning]'" in out


DDP_SCRIPT = Path(__file__).parent / "distributed" / "lightning_ddp.py"


@pytest.mark.distributed
def test_ddp_on_two_cpu_processes_writes_one_run_from_rank_0(tmp_path):
    """strategy="ddp", 2 processes (gloo): the probe combines both ranks, rank 0 writes."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run(
        [sys.executable, str(DDP_SCRIPT), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    run = nbviz.open_run(tmp_path / "run")
    assert run.steps("gradient").tolist() == [0, 2, 4]
    assert run.meta("distributed")["world_size"] == 2
    preds = run.predictions(split="val")
    assert preds["id"].tolist() == list(range(20))  # both ranks' halves, in dataset order
    assert preds["label"].tolist() == _data(20, 1).tensors[1].tolist()
    assert not (tmp_path / "run" / "ranks").exists()
