"""PyTorch Lightning's Trainer across tfrun's workers (DDP over gloo on
CPUs, NCCL on GPUs), on scikit-learn's bundled digits, its metrics sent to
tfrun by ``tfmesos.lightning.MetricsLogger``.

    tfrun --torch -w 2 -- python examples/torch_lightning.py
    python examples/torch_lightning.py          # alone: one process

Lightning needs no cluster class of its own here: its default
``LightningEnvironment`` reads what ``tfrun --torch`` sets. ``LOCAL_RANK``
set says someone else started the processes (Lightning starts none);
``NODE_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` place this one; the
world size it computes as ``num_nodes x devices``, which must be the
group's: the script takes ``num_nodes`` from ``GROUP_WORLD_SIZE`` (tfrun's
workers) and ``devices`` from ``LOCAL_WORLD_SIZE`` (``--nproc-per-task``).

Every rank trains on its share of each epoch (Lightning's
DistributedSampler) and logs its own batch's ``loss`` and ``accuracy`` at
every step (``--log-every``), and ``val_loss``/``val_accuracy`` on the test
split after each epoch (``sync_dist=True``: the ranks' mean, alike in every
task): tfrun shows worker 0's, run.json and ``tfmesos report`` keep each
task's. Rank 0 prints ``final accuracy: X``. Needs Lightning:
``pip install ".[torch,lightning,examples]"``.
"""

import argparse
import os
import warnings

import torch
import torch.nn.functional as F
from digits import SEED, load_data
from torch.utils.data import DataLoader, TensorDataset

import tfmesos.lightning

try:
    import lightning.pytorch as pl
except ImportError:          # the older package name
    import pytorch_lightning as pl  # type: ignore[no-redef]

# DataLoader workers would only cost start-up on these 8x8 images
warnings.filterwarnings("ignore", ".*does not have many workers.*")


class Digits(pl.LightningModule):
    def __init__(self, learning_rate):
        super().__init__()
        self.save_hyperparameters()
        torch.manual_seed(SEED)   # the same initial weights in every process
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                       torch.nn.Linear(64, 10))

    def _scores(self, batch):
        x, y = batch
        logits = self.net(x)
        return F.cross_entropy(logits, y), (logits.argmax(dim=1) == y).float().mean()

    def training_step(self, batch, batch_index):
        loss, accuracy = self._scores(batch)
        self.log("loss", loss)            # this rank's batch's, at every logged step
        self.log("accuracy", accuracy)
        return loss

    def validation_step(self, batch, batch_index):
        loss, accuracy = self._scores(batch)
        self.log("val_loss", loss, sync_dist=True)       # the epoch's, the ranks' mean
        self.log("val_accuracy", accuracy, sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.learning_rate, momentum=0.9)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32, help="per process (default 32)")
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--log-every", type=int, default=1, metavar="N",
                        help="log the training metrics every N steps (default 1)")
    parser.add_argument("--accelerator", default="auto", help="cpu, gpu, auto (default)")
    args = parser.parse_args(argv)

    nodes = int(os.environ.get("GROUP_WORLD_SIZE", "1"))      # tfrun --torch's workers
    devices = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))    # processes of each
    (x_train, y_train), (x_test, y_test) = load_data()
    train = DataLoader(TensorDataset(torch.from_numpy(x_train), torch.from_numpy(y_train)),
                       batch_size=args.batch_size, shuffle=True)
    test = DataLoader(TensorDataset(torch.from_numpy(x_test), torch.from_numpy(y_test)),
                      batch_size=256)
    trainer = pl.Trainer(
        accelerator=args.accelerator, devices=devices, num_nodes=nodes,
        strategy="ddp" if nodes * devices > 1 else "auto", max_epochs=args.epochs,
        logger=tfmesos.lightning.MetricsLogger(lightning=pl), log_every_n_steps=args.log_every,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0)
    model = Digits(args.learning_rate)
    trainer.fit(model, train, test)
    accuracy = float(trainer.callback_metrics["val_accuracy"])
    print("rank %d of %d: trained %d steps" % (trainer.global_rank, trainer.world_size,
                                               trainer.global_step), flush=True)
    if trainer.is_global_zero:
        print("final accuracy: %.4f" % accuracy, flush=True)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # Lightning leaves its process group to the interpreter's exit, where a
        # gloo rank may abort ("terminate called without an active exception",
        # exit code 134; PyTorch's docs, Shutdown): every rank destroys it
        # together, as examples/torch_ddp.py does.
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
