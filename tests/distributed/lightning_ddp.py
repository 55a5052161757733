"""Lightning with ``strategy="ddp"`` on two CPU processes (gloo), recorded by nbviz.

    python tests/distributed/lightning_ddp.py RUN_DIR

Lightning starts the second process itself (it runs this script again with its
rank in the environment). Both ranks run ``NbvizLogger`` and ``NbvizCallback``;
rank 0 writes ``RUN_DIR``. The model and data are those of
tests/test_integration_lightning.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import lightning as L
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from test_integration_lightning import Classifier, _data  # noqa: E402

from nbviz.integrations.lightning import NbvizCallback, NbvizLogger  # noqa: E402


def main(run_dir: str) -> None:
    L.seed_everything(0, verbose=False)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_steps=6,
        logger=NbvizLogger(run_dir),
        callbacks=[NbvizCallback(every=2)],
        log_every_n_steps=1,
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
    )
    train = torch.utils.data.DataLoader(_data(48, 0), batch_size=4)
    val = torch.utils.data.DataLoader(_data(20, 1), batch_size=4)
    trainer.fit(Classifier(), train, val)


if __name__ == "__main__":
    main(sys.argv[1])
