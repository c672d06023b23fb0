"""PyTorch DistributedDataParallel across tfrun's workers, on scikit-learn's
bundled digits (8x8 images, 10 classes), over gloo on CPUs (NCCL on GPUs).

    tfrun --torch -w 2 -- python examples/torch_ddp.py
    tfrun --torch -w 2 -- torchrun --nnodes {nnodes} --node-rank {node_rank} \\
        --nproc-per-node {nproc_per_task} --master-addr {master_addr} \\
        --master-port {master_port} examples/torch_ddp.py
    python examples/torch_ddp.py --processes 2
    tfrun --torch-elastic 1:2 -w 2 -- torchrun --max-restarts 3 \
        examples/torch_ddp.py --checkpoint-dir /shared/ckpt

``tfrun --torch`` gives every worker what ``torchrun`` gives the processes
it starts: ``MASTER_ADDR`` and ``MASTER_PORT`` (worker 0's host, at a port
Mesos reserved in its offer), ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ...;
``torch.distributed.init_process_group()`` reads them (``env://``), so the
script is the one ``torchrun`` would run, unchanged. Without them (no tfrun,
no torchrun) it trains alone: ``--processes N`` on the global batch that N
processes train on together, which DDP computes the same gradients for (the
mean of the ranks' mean gradients over equal shares of the batch is the
mean gradient over the batch), so its losses are the group's.

Every step's global batch is ``--batch-size`` samples per process, taken in
an order that every process draws alike (seeded per epoch); each rank
trains on its own share of it. Prints ``epoch N/M loss L`` (the mean loss
of the epoch's global batches: the same on every rank) and ``final loss:
L`` (the trained model's loss on the whole training set: every rank holds
the same weights, so the same), and on rank 0 ``final accuracy: X`` on the
test split.

``--checkpoint-dir DIR`` (elastic training, README "Elastic"): rank 0 saves
the model and optimizer to ``DIR/checkpoint.pt`` after every epoch (written
whole, then renamed) and then prints ``saved epoch N``; every process
starts from it when it is there (``resumed after epoch N``). torchrun
restarts every worker of the group when one fails or a node joins, and
they go on from the last epoch saved: each epoch is saved once. DIR must be
one directory for every task (a shared filesystem; on the embedded master
every task runs on this machine). Needs PyTorch: ``pip install ".[torch,examples]"``.
"""

import argparse
import gc
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from digits import SEED, load_data
from torch.nn.parallel import DistributedDataParallel

import tfmesos


def in_group():
    """Whether a launcher (tfrun --torch, torchrun) made this process a rank."""
    return all(name in os.environ for name in ("MASTER_ADDR", "MASTER_PORT", "RANK",
                                               "WORLD_SIZE"))


def build_model():
    torch.manual_seed(SEED)   # the same initial weights in every process
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 10))


def load_checkpoint(directory, model, optimizer):
    """The epochs already trained (0 without a checkpoint), the weights and
    optimizer state loaded into ``model`` and ``optimizer``."""
    path = os.path.join(directory, "checkpoint.pt")
    if not os.path.exists(path):
        return 0
    saved = torch.load(path, map_location="cpu")
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    return saved["epoch"]


def save_checkpoint(directory, model, optimizer, epoch):
    """Write the checkpoint whole, then rename it in place: a process killed
    meanwhile leaves the previous one."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.pt")
    partial = "%s.%d.tmp" % (path, os.getpid())
    torch.save({"epoch": epoch, "model": model.state_dict(),
                "optimizer": optimizer.state_dict()}, partial)
    os.replace(partial, path)


def main(argv=None, on_step=None):
    """``on_step(epoch, step, rank)``: called before every step (tests)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32, help="per process (default 32)")
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--processes", type=int, default=1,
                        help="without a process group: train alone on the global batch of "
                        "this many processes (default 1)")
    parser.add_argument("--checkpoint-dir", metavar="DIR",
                        help="save each epoch there (rank 0) and resume from it")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    device = torch.device("cpu")
    if in_group():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":   # one GPU a process: LOCAL_RANK's of the task's own
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            torch.cuda.set_device(device)
        dist.init_process_group(backend)   # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
        rank, processes, share = dist.get_rank(), dist.get_world_size(), 1
    else:
        backend, rank, processes = None, 0, args.processes
        share = processes       # this process trains on every share of the global batch

    model = build_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.learning_rate, momentum=0.9)
    first = 0
    if args.checkpoint_dir:
        first = load_checkpoint(args.checkpoint_dir, model, optimizer)
        if first:
            print("resumed after epoch %d" % first, flush=True)
    trained = model
    if backend is not None:
        trained = DistributedDataParallel(model, device_ids=[device.index] if device.index is
                                          not None else None)
    (x_train, y_train), (x_test, y_test) = load_data()
    x_all, y_all = torch.from_numpy(x_train).to(device), torch.from_numpy(y_train).to(device)
    batch = args.batch_size * processes
    steps = len(x_train) // batch
    print("training as rank %d of %d (%s): global batch %d, %d steps per epoch"
          % (rank, processes, backend or "alone", batch, steps), flush=True)

    for epoch in range(first, args.epochs):
        order = np.random.RandomState(SEED + epoch).permutation(len(x_train))
        total = torch.zeros((), device=device)
        for step in range(steps):
            if on_step is not None:
                on_step(epoch, step, rank)
            chosen = order[step * batch:(step + 1) * batch]
            own = chosen if backend is None else \
                chosen[rank * args.batch_size:(rank + 1) * args.batch_size]
            index = torch.from_numpy(own).to(device)
            loss = F.cross_entropy(trained(x_all[index]), y_all[index])
            optimizer.zero_grad()
            loss.backward()       # DDP averages the gradients across the ranks
            optimizer.step()
            total += loss.detach() * share
        if backend is not None:
            dist.all_reduce(total)   # the ranks' losses: the global batches' means
        print("epoch %d/%d loss %.6f" % (epoch + 1, args.epochs,
                                         total.item() / processes / steps), flush=True)
        if backend is not None and rank == 0:   # tfrun's status, run.json, report: README
            tfmesos.log_metrics(step=epoch + 1, loss=total.item() / processes / steps)
        if args.checkpoint_dir and rank == 0:
            save_checkpoint(args.checkpoint_dir, model, optimizer, epoch + 1)
            print("saved epoch %d" % (epoch + 1), flush=True)

    with torch.no_grad():
        final = F.cross_entropy(model(x_all), y_all).item()
        print("final loss: %.6f" % final, flush=True)
        if rank == 0:
            logits = model(torch.from_numpy(x_test).to(device))
            accuracy = (logits.argmax(dim=1).cpu().numpy() == y_test).mean()
            print("trained in %.1f s" % (time.perf_counter() - started), flush=True)
            print("final accuracy: %.4f" % accuracy, flush=True)
    if backend is not None:
        # Every rank tears the group down together: rank 0 alone ran the test
        # set above, and a gloo rank that destroys its group while a peer is
        # still busy may abort at exit ("terminate called without an active
        # exception": PyTorch's docs, Shutdown, call destroy_process_group
        # collectively). The DDP wrapper holds the group too: it goes first,
        # else the group is destroyed only as the interpreter exits, which
        # aborted 1 run in 12 here the same way.
        del trained
        gc.collect()
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
