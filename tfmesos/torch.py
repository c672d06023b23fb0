"""``tfmesos.torch.log_metrics(step=None, reduce=None, **values)``: metrics
from a plain PyTorch (DDP) loop under ``tfrun --torch``.

    loss = F.cross_entropy(model(x), y)
    ...
    tfmesos.torch.log_metrics(step=step, loss=loss)                 # this rank's
    tfmesos.torch.log_metrics(step=step, reduce="mean", loss=loss)  # the ranks' mean

Without ``reduce`` it is ``tfmesos.log_metrics`` (which takes tensors of
one element itself): every rank logs its own values, kept under its own
task (``worker:1``'s ``loss``) — what tfmesos shows per task. With
``reduce="mean"`` (or ``"sum"``, ``"min"``, ``"max"``) the values are first
reduced across the ranks of ``torch.distributed``'s default process group
(one ``all_reduce`` of a float64 tensor, on the current CUDA device under
NCCL), and every rank logs the result: the tasks' series are then alike.
The reduce is a collective: every rank calls it at the same points with the
same names (a rank that does not call it makes the others wait, as any
``all_reduce`` does); ranks that give other names get a ``ValueError`` naming
their own (a first, tiny ``all_reduce`` of the names' count and checksum,
before the values); a value that is not a number is reduced as NaN and
recorded as null. Without an initialised process group the group is this
process alone: the values are logged as given.

Returns ``{name: value}`` as logged (floats; None for a value that is not
finite), to print. PyTorch is imported only by a call with ``reduce``
(``import tfmesos.torch`` imports nothing of it).
"""

import functools
import math
import zlib

from .task.user_metrics import log_values, numbers

REDUCTIONS = ("mean", "sum", "min", "max")


def log_metrics(step=None, reduce=None, **values):
    """Log ``values`` at ``step`` for this task (``tfmesos.log_metrics``),
    reduced across the default process group's ranks first when ``reduce``
    is one of ``REDUCTIONS``. Returns the values logged."""
    if reduce is not None and reduce not in REDUCTIONS:
        raise ValueError("tfmesos.torch.log_metrics: reduce must be None or one of %s, not %r"
                         % (", ".join(REDUCTIONS), reduce))
    clean = numbers(values, depth=1, keep=reduce is not None)
    if reduce is not None and clean:
        clean = _reduced(clean, reduce)
    log_values(step, clean, checked=True)
    return dict(clean)


def _reduced(clean, reduce):
    """``clean``'s values reduced across the default group's ranks, by the
    names' order (sorted: keyword order may differ between ranks)."""
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_initialized():
        return clean
    import torch
    names = tuple(sorted(clean))
    device = "cpu"
    if dist.get_backend() == "nccl":   # NCCL reduces CUDA tensors only
        device = "cuda:%d" % torch.cuda.current_device()
    # The names first: reduced by position, other names (or another count)
    # would mix one rank's loss with another's accuracy, or wait forever.
    # MAX of [n, crc, -n, -crc] gives the largest and the smallest at once.
    signature = _signature(names)
    check = torch.tensor(signature + tuple(-part for part in signature), dtype=torch.int64,
                         device=device)
    dist.all_reduce(check, op=dist.ReduceOp.MAX)
    got = check.tolist()   # one copy to the host (a CUDA tensor under NCCL)
    largest, smallest = got[:2], [-part for part in got[2:]]
    if largest != smallest:
        raise ValueError("tfmesos.torch.log_metrics: the ranks reduce other metric names than "
                         "this rank's: %s; all ranks must log the same names with reduce= (the "
                         "values are reduced name by name)" % ", ".join(names))
    tensor = torch.tensor([math.nan if clean[name] is None else clean[name] for name in names],
                          dtype=torch.float64, device=device)
    # gloo has no ReduceOp.AVG: the mean is the sum over the world size
    op = {"min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}.get(reduce, dist.ReduceOp.SUM)
    dist.all_reduce(tensor, op=op)
    if reduce == "mean":
        tensor /= dist.get_world_size()
    return {name: (value if math.isfinite(value) else None)
            for name, value in zip(names, tensor.tolist())}


@functools.lru_cache(maxsize=64)
def _signature(names):
    """(how many, CRC-32 of the names joined by NUL) of sorted ``names``."""
    return (len(names), zlib.crc32("\0".join(names).encode("utf-8")))
