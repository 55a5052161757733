"""NbvizCallback in a real transformers.Trainer: a tiny BERT classifier built from a config."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")
torch = pytest.importorskip("torch")

import nbviz  # noqa: E402
from nbviz.integrations.transformers import NbvizCallback  # noqa: E402

pytestmark = pytest.mark.slow

WORDS = ["good", "great", "fine", "bad", "awful", "poor", "the", "a", "movie", "plot", "was", "is"]
MAX_STEPS, EVERY, ACCUMULATE, LOG_EVERY, EVAL_EVERY = 24, 4, 2, 4, 8


def _tokenizer(tmp: Path) -> transformers.BertTokenizerFast:
    vocab = tmp / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    params = inspect.signature(transformers.BertTokenizerFast.__init__).parameters
    key = "vocab_file" if "vocab_file" in params else "vocab"  # transformers 4 / 5
    return transformers.BertTokenizerFast(**{key: str(vocab)})


def _sentences(n: int, seed: int) -> tuple[list[str], list[int]]:
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for _ in range(n):
        label = int(rng.integers(0, 2))
        mood = rng.choice(WORDS[:3] if label else WORDS[3:6])
        filler = rng.choice(WORDS[6:], size=int(rng.integers(2, 5))).tolist()
        texts.append(" ".join([*filler[:1], "movie", "was", mood, *filler[1:]]))
        labels.append(label)
    return texts, labels


class _Dataset(torch.utils.data.Dataset):
    def __init__(self, tokenizer, texts, labels):
        self.enc = tokenizer(texts, padding="max_length", max_length=12, truncation=True)
        self.labels = labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict:
        item = {k: torch.tensor(v[i]) for k, v in self.enc.items()}
        item["labels"] = torch.tensor(self.labels[i])
        return item


def _model() -> transformers.BertForSequenceClassification:
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=5 + len(WORDS),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=16,
        num_labels=2,
        id2label={0: "negative", 1: "positive"},
        label2id={"negative": 0, "positive": 1},
    )
    return transformers.BertForSequenceClassification(config)


def train_tiny_bert(tmp: Path) -> dict:
    """Train the tiny classifier with NbvizCallback into ``tmp / "run"``; what the tests read."""
    tokenizer = _tokenizer(tmp)
    train = _Dataset(tokenizer, *_sentences(160, 0))
    val_texts, val_labels = _sentences(40, 1)
    val = _Dataset(tokenizer, val_texts, val_labels)
    args = transformers.TrainingArguments(
        output_dir=str(tmp / "out"),
        per_device_train_batch_size=4,
        per_device_eval_batch_size=16,
        gradient_accumulation_steps=ACCUMULATE,
        max_steps=MAX_STEPS,
        learning_rate=1e-3,
        logging_steps=LOG_EVERY,
        eval_strategy="steps",
        eval_steps=EVAL_EVERY,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    callback = NbvizCallback(tmp / "run", every=EVERY)
    model = _model()
    trainer = transformers.Trainer(
        model=model,
        args=args,
        train_dataset=train,
        eval_dataset=val,
        processing_class=tokenizer,
        callbacks=[callback],
    )
    trainer.train()
    return {
        "run": nbviz.open_run(tmp / "run"),
        "trainer": trainer,
        "callback": callback,
        "model": model,
        "tokenizer": tokenizer,
        "val": (val_texts, val_labels),
        "tmp": tmp,
    }


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return train_tiny_bert(tmp_path_factory.mktemp("hf"))


def _logged_steps(trainer, name: str) -> list[int]:
    return [h["step"] for h in trainer.state.log_history if name in h]


def test_the_probe_captures_every_optimizer_step_that_is_a_multiple_of_every(trained):
    """Gradient accumulation 2: a step is an optimizer step, numbered as global_step."""
    run = trained["run"]
    expected = [s for s in range(1, MAX_STEPS + 1) if s % EVERY == 0]
    assert run.steps("gradient").tolist() == expected
    assert run.steps("activation").tolist() == expected
    stats = run.stats("gradient")
    assert set(stats["step"]) == set(expected)
    assert "classifier.weight" in set(stats["layer"])
    assert trained["trainer"].state.global_step == MAX_STEPS


def test_scalars_are_what_the_trainer_logged_at_its_global_steps(trained):
    run, trainer = trained["run"], trained["trainer"]
    train_steps = list(range(LOG_EVERY, MAX_STEPS + 1, LOG_EVERY))
    assert _logged_steps(trainer, "loss") == train_steps
    for name in ("loss", "learning_rate", "grad_norm", "eval_loss"):
        frame = run.scalars(name)
        assert frame["step"].tolist() == _logged_steps(trainer, name), name
        logged = [h[name] for h in trainer.state.log_history if name in h]
        np.testing.assert_allclose(frame["value"].to_numpy(), logged, rtol=1e-6)
    assert run.scalars("eval_loss")["step"].tolist() == [8, 16, 24]
    # the probe's learning rate at a step is the one that step's update used: the Trainer's
    lr = run.scalars("learning_rate").set_index("step")["value"]
    probe_lr = run.scalars("optimizer/lr").set_index("step")["value"]
    np.testing.assert_allclose(probe_lr.loc[lr.index].to_numpy(), lr.to_numpy(), rtol=1e-6)
    # epoch comes with every log (train and eval alike): one value per step
    assert run.scalars("epoch")["step"].tolist() == sorted(set(_logged_steps(trainer, "epoch")))
    # the end-of-training summary is one number per run: config, not a curve
    assert "train_runtime" not in run.scalar_names()
    assert "train_loss" not in run.scalar_names()
    summary = run.config["train_summary"]
    assert summary["train_loss"] == pytest.approx(trainer.state.log_history[-1]["train_loss"])


def test_training_arguments_and_model_config_are_the_runs_config(trained):
    config = trained["run"].config
    assert config["training_args"]["gradient_accumulation_steps"] == ACCUMULATE
    assert config["training_args"]["max_steps"] == MAX_STEPS
    assert config["model_config"]["hidden_size"] == 32
    assert trained["run"].class_names == ["negative", "positive"]


def test_layers_are_the_models_modules(trained):
    layers = trained["run"].layers()
    names = set(layers["name"])
    assert {"classifier", "bert.encoder.layer.0.attention.self.query"} <= names


def test_each_evaluation_records_predictions_in_the_eval_datasets_order(trained):
    run, (_, labels) = trained["run"], trained["val"]
    steps = run.prediction_steps("val").tolist()
    assert steps == [8, 16, 24] == _logged_steps(trained["trainer"], "eval_loss")
    for step in steps:
        at = run.predictions(step=step, split="val")
        assert at["id"].tolist() == list(range(len(labels)))
        assert at["label"].tolist() == labels
        assert at["loss"].notna().all()
    # the per-sample losses average to the Trainer's eval_loss at that step
    last = run.predictions(step=24, split="val")
    eval_loss = run.scalars("eval_loss")["value"].iloc[-1]
    assert last["loss"].mean() == pytest.approx(eval_loss, rel=1e-4)


def test_predictions_match_the_model_run_on_the_eval_set(trained):
    """The recorded predictions are the trained model's own on the eval set (last evaluation)."""
    model, tokenizer, (texts, _) = trained["model"], trained["tokenizer"], trained["val"]
    enc = tokenizer(texts, padding="max_length", max_length=12, return_tensors="pt")
    model.eval()
    with torch.no_grad():
        logits = model(**enc).logits
    preds = trained["run"].predictions(step=24, split="val").sort_values("id")
    assert preds["pred"].tolist() == logits.argmax(1).tolist()


def test_embeddings_are_the_classifier_inputs(trained):
    ids, matrix = trained["run"].embeddings(24, split="val")
    assert ids.tolist() == list(range(40))
    assert matrix.shape == (40, 32)


def test_samples_are_the_decoded_text(trained):
    texts, labels = trained["val"]
    samples = trained["run"].samples(split="val")
    assert samples["text"].tolist() == texts
    assert samples["label"].tolist() == labels


def test_the_probe_is_closed_after_training_and_close_removes_every_hook(trained):
    model, callback = trained["model"], trained["callback"]
    assert callback.probe is None and callback.run is None
    callback.close()
    hooks = [
        (name, len(m._forward_hooks), len(m._forward_pre_hooks))
        for name, m in model.named_modules()
        if m._forward_hooks or m._forward_pre_hooks
    ]
    assert hooks == []


def test_the_confusion_matrix_gallery_and_projector_read_the_run(trained):
    run, texts = trained["run"], trained["val"][0]
    cm = nbviz.ConfusionMatrix(run, split="val")
    assert cm.step == 24
    gallery = nbviz.SampleGallery(run, split="val", sort_by="loss")
    assert gallery.eval_step == 24 and gallery.note == ""
    card = gallery.items[0]
    assert card["kind"] == "text" and card["text"] == texts[card["id"]]
    assert card["label_name"] in ("negative", "positive") and card["loss"] > 0
    nbviz.EmbeddingProjector(run, method="pca")


def test_an_evaluation_after_training_is_recorded_too(tmp_path):
    tokenizer = _tokenizer(tmp_path)
    val_texts, val_labels = _sentences(12, 3)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), report_to=[], use_cpu=True, disable_tqdm=True
    )
    callback = NbvizCallback()
    trainer = transformers.Trainer(
        model=_model(),
        args=args,
        eval_dataset=_Dataset(tokenizer, val_texts, val_labels),
        processing_class=tokenizer,
        callbacks=[callback],
    )
    trainer.evaluate()
    run = nbviz.open_run(tmp_path / "out" / "nbviz")  # the default: <output_dir>/nbviz
    assert run.predictions(step=0, split="val")["label"].tolist() == val_labels
    assert run.scalars("eval_loss")["step"].tolist() == [0]
    assert callback.run is None  # closed again once the evaluation was recorded
    callback.close()


def test_a_new_training_into_an_existing_run_is_refused_without_overwrite(trained, tmp_path):
    callback = NbvizCallback(trained["tmp"] / "run")
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=1, report_to=[], use_cpu=True, disable_tqdm=True
    )
    tokenizer = trained["tokenizer"]
    trainer = transformers.Trainer(
        model=_model(),
        args=args,
        train_dataset=_Dataset(tokenizer, *_sentences(4, 5)),
        callbacks=[callback],
    )
    with pytest.raises(FileExistsError, match="already holds a run.*overwrite=True"):
        trainer.train()
    callback.close()


def test_unknown_watch_options_are_refused_at_once():
    with pytest.raises(TypeError, match="unknown option.*evry"):
        NbvizCallback("runs/x", evry=10)


def test_without_transformers_the_import_names_the_extra():
    code = (
        "import sys; sys.modules['transformers'] = None\n"
        "try:\n    import nbviz.integrations.transformers\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ
    ).stdout
    assert "pip install 'nbviz[transformers]'" in out
