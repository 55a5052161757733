"""How ``run.evaluate`` calls a model with a batch: a tuple is split into arguments only
where that is clearly meant, labels reach only a model that needs them to line positions up,
a dict batch's entries are those ``forward`` takes, and wrappers are seen through."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import nbviz


class TwoPartInput(nn.Module):
    """One argument, an ``(image, metadata)`` pair, and a flag after it."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.head = nn.Linear(4, 8), nn.Linear(2, 8), nn.Linear(8, 3)

    def forward(self, x, return_features=False):
        img, meta = x
        h = torch.relu(self.a(img) + self.b(meta))
        return h if return_features else self.head(h)


class WithLengths(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb, self.fc = nn.Embedding(20, 8), nn.Linear(8, 3)

    def forward(self, x, lengths=None):
        h = self.emb(x)
        if lengths is None:
            return self.fc(h.mean(1))
        keep = torch.arange(x.shape[1])[None] < lengths[:, None]
        return self.fc((h * keep[..., None]).sum(1) / lengths[:, None])


class Sequences(nn.Module):
    """Takes a list of variable-length sequences (padding is its own business)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb, self.fc = nn.Embedding(20, 8), nn.Linear(8, 3)

    def forward(self, seqs, lengths=None):
        return self.fc(torch.stack([self.emb(q).mean(0) for q in seqs]))


def evaluation(model, loader):
    from nbviz.probes.evaluate import run_evaluation

    return run_evaluation(model.eval(), loader, None, None, 10_000)


def test_a_pair_given_as_the_one_argument_stays_one_argument_beside_a_flag():
    torch.manual_seed(0)
    model = TwoPartInput().eval()
    img, meta, y = torch.randn(6, 4), torch.randn(6, 2), torch.randint(0, 3, (6,))
    got = evaluation(model, [((img, meta), y)])
    with torch.no_grad():
        np.testing.assert_allclose(got.logits, model((img, meta)).numpy(), rtol=1e-6)


def test_inputs_and_lengths_are_two_arguments_where_forward_takes_them():
    torch.manual_seed(0)
    model = WithLengths().eval()
    x, lengths = torch.randint(0, 20, (6, 5)), torch.tensor([5, 3, 2, 5, 1, 4])
    got = evaluation(model, [((x, lengths), torch.randint(0, 3, (6,)))])
    with torch.no_grad():
        np.testing.assert_allclose(got.logits, model(x, lengths).numpy(), rtol=1e-6)


def test_a_list_of_two_sequences_is_one_argument():
    torch.manual_seed(0)
    model = Sequences().eval()
    seqs = [torch.randint(0, 20, (n,)) for n in (4, 2)]
    got = evaluation(model, [(seqs, torch.tensor([0, 1]))])
    with torch.no_grad():
        np.testing.assert_allclose(got.logits, model(seqs).numpy(), rtol=1e-6)


class LossWhenGivenLabels(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, labels=None):
        logits = self.fc(x)
        if labels is None:
            return logits
        return nn.functional.cross_entropy(logits, labels), logits


class MarginWhenGivenLabels(LossWhenGivenLabels):
    def forward(self, x, labels=None):
        logits = self.fc(x)
        if labels is not None:  # a training-time margin on the true class
            logits = logits - 5.0 * nn.functional.one_hot(labels, 3)
        return logits


@pytest.mark.parametrize("model_class", [LossWhenGivenLabels, MarginWhenGivenLabels])
def test_a_classifier_is_evaluated_without_its_labels(model_class):
    torch.manual_seed(0)
    model = model_class().eval()
    x, y = torch.randn(6, 4), torch.randint(0, 3, (6,))
    got = evaluation(model, [{"x": x, "labels": y}])
    with torch.no_grad():
        np.testing.assert_allclose(got.logits, model(x).numpy(), rtol=1e-6)


def test_a_leading_loss_in_the_outputs_is_skipped_for_the_scores_after_it():
    class LossFirst(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            logits = self.fc(x)
            return logits.sum() * 0, logits

    torch.manual_seed(0)
    model = LossFirst().eval()
    x = torch.randn(5, 4)
    got = evaluation(model, [(x, torch.randint(0, 3, (5,)))])
    with torch.no_grad():
        np.testing.assert_allclose(got.logits, model(x)[1].numpy(), rtol=1e-6)


class TokenClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb, self.fc = nn.Embedding(20, 8), nn.Linear(8, 3)

    def forward(self, input_ids, attention_mask=None):
        return self.fc(self.emb(input_ids).mean(1))


def test_a_keyword_batchs_entries_that_forward_does_not_take_are_left_out():
    torch.manual_seed(0)
    model = TokenClassifier().eval()
    ids = torch.randint(0, 20, (6, 5))
    batch = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "special_tokens_mask": torch.zeros_like(ids),
        "text": ["a"] * 6,
        "labels": torch.randint(0, 3, (6,)),
    }
    got = evaluation(model, [batch])
    with torch.no_grad():
        np.testing.assert_allclose(got.logits, model(ids).numpy(), rtol=1e-6)


def test_a_parameter_forward_needs_and_the_batch_lacks_is_named():
    class Needs(TokenClassifier):
        def forward(self, input_ids, token_type_ids):
            return self.fc(self.emb(input_ids).mean(1))

    ids = torch.randint(0, 20, (4, 5))
    with pytest.raises(ValueError, match=r"needs token_type_ids.*keys \['input_ids', 'labels'\]"):
        evaluation(Needs(), [{"input_ids": ids, "labels": torch.zeros(4, dtype=torch.long)}])


def test_a_mask_that_forward_names_is_passed_to_it():
    class Masked(TokenClassifier):
        def forward(self, x, mask=None):
            h = self.emb(x)
            if mask is None:
                return self.fc(h.mean(1))
            return self.fc((h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True))

    torch.manual_seed(0)
    model = Masked().eval()
    x = torch.randint(0, 20, (6, 5))
    mask = (torch.arange(5)[None] < torch.tensor([5, 3, 2, 5, 1, 4])[:, None]).float()
    got = evaluation(model, [{"x": x, "mask": mask, "label": torch.randint(0, 3, (6,))}])
    with torch.no_grad():
        np.testing.assert_allclose(got.logits, model(x, mask).numpy(), rtol=1e-6)


def test_a_wrapped_model_is_called_as_the_model_it_wraps():
    torch.manual_seed(0)
    inner = WithLengths().eval()
    x, lengths = torch.randint(0, 20, (4, 5)), torch.tensor([5, 2, 3, 1])
    got = evaluation(nn.DataParallel(inner), [((x, lengths), torch.tensor([0, 1, 2, 0]))])
    with torch.no_grad():
        np.testing.assert_allclose(got.logits, inner(x, lengths).numpy(), rtol=1e-6)
    masked = TokenClassifier().eval()
    ids = torch.randint(0, 20, (4, 5))
    batch = {"input_ids": ids, "text": ["a"] * 4, "labels": torch.tensor([0, 1, 2, 0])}
    got = evaluation(nn.DataParallel(masked), [batch])
    with torch.no_grad():
        np.testing.assert_allclose(got.logits, masked(ids).numpy(), rtol=1e-6)


def test_through_a_real_sqlite_run_the_pair_model_is_scored_on_its_own_logits(tmp_path):
    torch.manual_seed(0)
    model = TwoPartInput().eval()
    img, meta, y = torch.randn(6, 4), torch.randn(6, 2), torch.randint(0, 3, (6,))
    run = nbviz.Run(tmp_path / "run")
    got = run.evaluate(0, model, [((img, meta), y)])
    with torch.no_grad():
        expected = nn.functional.cross_entropy(model((img, meta)), y)
    assert got["val_loss"] == pytest.approx(float(expected), rel=1e-5)
    run.close()


def test_float_keyword_inputs_are_kept_as_the_samples_never_their_mask():
    class Audio(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(16, 3)

        def forward(self, input_values, attention_mask=None):
            return self.fc((input_values * attention_mask).unfold(1, 16, 16).mean(1))

    torch.manual_seed(0)
    values, mask = torch.randn(4, 64), torch.ones(4, 64, dtype=torch.long)
    mask[1, 40:] = 0
    batch = {"attention_mask": mask, "input_values": values, "labels": torch.tensor([0, 1, 2, 0])}
    got = evaluation(Audio(), [batch])
    np.testing.assert_array_equal(got.inputs, values.numpy())


def test_capture_ids_with_inputs_of_several_arguments_point_to_run_capture(tmp_path):
    torch.manual_seed(0)
    model = WithLengths().eval()
    x, lengths = torch.randint(0, 20, (4, 5)), torch.tensor([5, 2, 3, 1])
    run = nbviz.Run(tmp_path / "run")
    with pytest.raises(ValueError, match=r"capture_ids \[0\].*run\.capture\(model, sample, id\)"):
        run.evaluate(0, model, [((x, lengths), torch.tensor([0, 1, 2, 0]))], capture_ids=[0])
    run.close()


def test_a_compiled_models_forward_is_read_through_the_wrapper():
    from nbviz.probes.eval_batch import forward_parameters

    compiled = torch.compile(WithLengths())
    assert list(forward_parameters(compiled)) == ["x", "lengths"]
    assert list(forward_parameters(nn.DataParallel(compiled))) == ["x", "lengths"]


def test_a_shared_mask_is_a_second_argument_where_forward_needs_one():
    class CausalMean(TokenClassifier):
        def forward(self, x, causal):  # causal: (tokens, tokens), shared by the batch
            h = self.emb(x)
            return self.fc((causal.float() @ h).mean(1))

    torch.manual_seed(0)
    model = CausalMean().eval()
    x, causal = torch.randint(0, 20, (6, 5)), torch.ones(5, 5).tril().bool()
    got = evaluation(model, [((x, causal), torch.randint(0, 3, (6,)))])
    with torch.no_grad():
        np.testing.assert_allclose(got.logits, model(x, causal).numpy(), rtol=1e-6)
