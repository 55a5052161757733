"""The README's examples for the integrations run as written, in a fresh directory.

Each ``python`` block of a section runs as one script. The Trainer example's
checkpoint is a hub name; here it is a tiny BERT saved from a config (no download).
"""

from __future__ import annotations

import inspect
import os
import re
import shlex
from pathlib import Path

import pytest

import nbviz
from nbviz.cli import main as cli

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks(section: str, language: str) -> list[str]:
    """The fenced ``language`` blocks of the README section titled ``section``."""
    text = README.read_text()
    start = text.index(f"\n### {section}\n")
    end = text.find("\n### ", start + 1)
    body = text[start : end if end != -1 else None]
    return re.findall(rf"```{language}\n(.*?)```", body, flags=re.S)


def _run(code: str) -> dict:
    scope: dict = {"__name__": "__main__"}
    exec(compile(code, str(README), "exec"), scope)
    return scope


def _tiny_checkpoint(where: Path, transformers) -> str:
    """A BERT classifier and its tokenizer saved as a checkpoint directory."""
    words = "a great movie an awful plot fine acting poor film".split()
    vocab = where / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    params = inspect.signature(transformers.BertTokenizerFast.__init__).parameters
    key = "vocab_file" if "vocab_file" in params else "vocab"  # transformers 4 / 5
    tokenizer = transformers.BertTokenizerFast(**{key: str(vocab)})
    config = transformers.BertConfig(
        vocab_size=5 + len(words),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
    )
    checkpoint = where / "checkpoint"
    transformers.BertForSequenceClassification(config).save_pretrained(checkpoint)
    tokenizer.save_pretrained(checkpoint)
    return str(checkpoint)


def test_the_trainer_example_runs(tmp_path, monkeypatch):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.chdir(tmp_path)
    (code,) = _blocks("Hugging Face Trainer", "python")
    assert '"distilbert-base-uncased"' in code
    local = _tiny_checkpoint(tmp_path, transformers)
    code = code.replace('"distilbert-base-uncased"', repr(local))
    code = code.replace("TrainingArguments(", "TrainingArguments(use_cpu=True, report_to=[], ", 1)
    scope = _run(code)
    run, steps = scope["run"], scope["trainer"].state.global_step
    assert steps == 18  # 48 samples, batches of 4, accumulation 2, 3 epochs
    assert run.steps("gradient").tolist() == list(range(2, steps + 1, 2))
    assert run.prediction_steps("val").tolist() == [6, 12, 18]
    assert run.samples(split="val")["text"].tolist()[:2] == ["a great movie", "an awful plot"]
    assert isinstance(scope["nbviz"].Dashboard(run), nbviz.Dashboard)


def test_the_lightning_example_runs(tmp_path, monkeypatch):
    pytest.importorskip("lightning")
    monkeypatch.chdir(tmp_path)
    (code,) = _blocks("PyTorch Lightning", "python")
    code = code.replace("L.Trainer(", "L.Trainer(accelerator='cpu', enable_progress_bar=False, ", 1)
    scope = _run(code)
    run = nbviz.open_run(tmp_path / "runs" / "pl")
    assert run.config == {"hidden": 64, "lr": 0.1}
    assert run.steps("gradient").tolist() == list(range(0, scope["trainer"].global_step, 10))
    assert run.prediction_steps("val").tolist() == run.scalars("val_loss")["step"].tolist()
    assert run.scalars("train_loss")["step"].tolist() == list(range(4, 70, 5))  # 14 batches x 5


def test_the_tensorboard_example_runs(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    monkeypatch.chdir(tmp_path)
    (code,) = _blocks("TensorBoard logs", "python")
    (shell,) = _blocks("TensorBoard logs", "sh")
    scope = _run(code)
    assert [r.name for r in scope["runs"]] == ["lr_0.01", "lr_0.1"]
    assert scope["run"].scalars("loss/train")["step"].tolist() == list(range(0, 100, 10))
    command = next(line for line in shell.splitlines() if line.startswith("nbviz import-tb"))
    argv = shlex.split(command.split("#")[0])[1:]
    assert cli(argv) == 0
    imported = nbviz.open_run(Path(argv[argv.index("-o") + 1]) / "lr_0.1")
    assert imported.histogram_steps("fc1.weight", "gradient").tolist() == list(range(0, 100, 10))
    assert os.path.isdir(tmp_path / "runs" / "from_tb" / "lr_0.01")
