"""Metrics from PyTorch without a run (issue 36, item 5): tensors given to
``tfmesos.log_metrics``, ``tfmesos.torch.log_metrics``' reduce in a gloo
group of one process (in this one), and ``tfmesos.lightning.MetricsLogger``
as Lightning's Trainer calls it. Neither torch nor Lightning is imported
by ``import tfmesos`` or a call that gives no tensor. (Two ranks: the
integration test tests/test_lightning_runs.py.)"""

import argparse
import collections
import importlib.util
import json
import os
import subprocess
import sys
import warnings

import pytest
from installed import require
from tfrun_helpers import REPO, only_metrics_warnings

from tfmesos.protocol import hostport, task_env
from tfmesos.protocol.metric_points import MetricError, check_value
from tfmesos.task import user_metrics

# The tests whose ranks (processes of their own) import it.
INSTALLED = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                               reason="torch is not installed")


@pytest.fixture
def torch():
    """PyTorch for the tests that use it, not imported as pytest collects
    this module: every session collects it (~2 s of CPU each)."""
    return pytest.importorskip("torch")


@pytest.fixture
def points(monkeypatch):
    """The points this process logs, as cluster() records them; warnings anew."""
    monkeypatch.setattr(user_metrics, "_warned", set())
    monkeypatch.setattr(user_metrics, "_next_step", 0)
    monkeypatch.setattr(user_metrics, "_pending", collections.deque())
    logged: list = []
    token = user_metrics.record_locally(logged.append)
    yield logged
    user_metrics.stop_recording(token)


def values(logged):
    return [(point[0], point[2]) for point in logged]


def test_tensors_of_one_element_are_numbers_off_autograd(torch, points):
    import tfmesos
    weight = torch.tensor(3.0, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)   # torch's "requires_grad ... to a scalar"
        warnings.simplefilter("ignore", user_metrics.MetricsWarning)   # "nan is not finite"
        assert tfmesos.log_metrics(step=2, loss=weight * 2, acc=torch.tensor([0.5]),
                                   count=torch.tensor([[7]]), half=torch.tensor(0.25).half(),
                                   nan=torch.tensor(float("nan")))
    assert values(points) == [(2, {"loss": 6.0, "acc": 0.5, "count": 7.0, "half": 0.25,
                                   "nan": None})]


def test_a_tensor_of_more_elements_is_left_out_with_a_warning_naming_it(torch, points):
    import tfmesos
    with warnings.catch_warnings(record=True) as caught:
        only_metrics_warnings()
        assert tfmesos.log_metrics(loss=torch.ones(2, 2), empty=torch.zeros(0), acc=0.5)
        assert not tfmesos.log_metrics(loss=torch.ones(3))   # once per name
    assert values(points) == [(0, {"acc": 0.5})]
    messages = [str(w.message) for w in caught]
    assert messages == [
        "tfmesos.log_metrics: loss: a metric value must be one number, not a tensor of 4 "
        "elements (shape [2, 2]): log its mean() or one element; not recorded",
        "tfmesos.log_metrics: empty: a metric value must be one number, not a tensor of 0 "
        "elements (shape [0]): log its mean() or one element; not recorded"]
    assert {w.filename for w in caught} == {__file__}   # the caller's line


JAX_BOOLEAN = """
import jax.numpy as jnp
from tfmesos.protocol.metric_points import MetricError, check_value
try:
    check_value(jnp.array(True))
except MetricError as exc:
    print(exc)
"""


def test_booleans_of_torch_are_no_metric(torch):
    with pytest.raises(MetricError, match="must be a number, not bool"):
        check_value(user_metrics._scalar(torch.tensor(True)))


@pytest.mark.jax    # its process imports JAX: in pytest's, JAX would warn at every fork after
def test_booleans_of_jax_are_no_metric():
    require("jax")
    done = subprocess.run([sys.executable, "-c", JAX_BOOLEAN], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS="cpu"))
    assert "must be a number, not" in done.stdout, done.stderr[-2000:]


def test_other_bad_values_name_their_key_too(points):
    import tfmesos
    numpy = pytest.importorskip("numpy")
    with warnings.catch_warnings(record=True) as caught:
        only_metrics_warnings()
        tfmesos.log_metrics(loss="high", grid=numpy.ones(3), ok=1)
    assert [str(w.message).split(":")[1].strip() for w in caught] == ["loss", "grid"]


def test_neither_torch_nor_lightning_is_imported_unless_a_tensor_or_logger_is_made():
    code = ("import sys, warnings, tfmesos\n"
            "warnings.simplefilter('ignore')\n"
            "tfmesos.log_metrics(loss=1.0); tfmesos.torch.log_metrics(loss=1.0)\n"
            "import tfmesos.lightning\n"
            "print([m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'lightning', 'pytorch_lightning', 'numpy')])")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                            text=True, timeout=120,
                            env={k: v for k, v in os.environ.items()
                                 if not k.startswith("TFMESOS_")})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# -- tfmesos.torch ------------------------------------------------------------------

@pytest.fixture
def group_of_one(monkeypatch):
    dist = pytest.importorskip("torch.distributed")
    port = hostport.free_port("127.0.0.1")
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=0,
                            world_size=1)
    yield dist
    dist.destroy_process_group()


def test_without_reduce_each_rank_logs_its_own(torch, points):
    import tfmesos.torch
    assert tfmesos.torch.log_metrics(step=1, loss=torch.tensor(0.5), n=3) == \
        {"loss": 0.5, "n": 3.0}
    assert values(points) == [(1, {"loss": 0.5, "n": 3.0})]


@pytest.mark.filterwarnings("ignore:.*inf is not finite")
@pytest.mark.parametrize("reduce", ["mean", "sum", "min", "max"])
def test_reduce_in_a_group_of_one_is_the_values(torch, points, group_of_one, reduce):
    import tfmesos.torch
    logged = tfmesos.torch.log_metrics(step=4, reduce=reduce, loss=torch.tensor([0.25]),
                                       acc=0.5, inf=float("inf"))
    assert logged == {"acc": 0.5, "inf": None, "loss": 0.25}
    assert values(points) == [(4, logged)]


def test_reduce_keeps_a_bad_value_s_place_as_null(torch, points, group_of_one):
    import tfmesos.torch
    with warnings.catch_warnings(record=True) as caught:
        only_metrics_warnings()
        logged = tfmesos.torch.log_metrics(reduce="mean", a=1.0, b=torch.ones(2), c="x", d=2)
    assert logged == {"a": 1.0, "b": None, "c": None, "d": 2.0}
    assert [str(w.message).split(":")[1].strip() for w in caught] == ["b", "c"]
    assert all(str(w.message).endswith("recorded as null") for w in caught)
    assert {w.filename for w in caught} == {__file__}


def test_reduce_without_a_group_logs_the_values(points):
    import tfmesos.torch
    assert tfmesos.torch.log_metrics(step=0, reduce="mean", loss=0.5) == {"loss": 0.5}
    assert values(points) == [(0, {"loss": 0.5})]


def test_an_unknown_reduce_is_a_value_error(points):
    import tfmesos.torch
    with pytest.raises(ValueError, match="reduce must be None or one of mean, sum, min, max, "
                       "not 'avg'"):
        tfmesos.torch.log_metrics(reduce="avg", loss=1.0)
    assert points == []


# Two ranks (two processes, gloo on 127.0.0.1): log_metrics(reduce=...)
# with each rank's own names; its result or its ValueError, as JSON.
TWO_RANKS = """
import datetime, json, sys
import torch.distributed as dist, tfmesos.torch
rank, port, values = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + port, rank=rank, world_size=2,
                        timeout=datetime.timedelta(seconds=30))
out = {}
for _ in range(2):   # twice: the second call with the same names too
    try:
        out["logged"] = tfmesos.torch.log_metrics(step=1, reduce="mean", **values)
    except ValueError as exc:
        out["error"] = str(exc)
dist.barrier()
dist.destroy_process_group()
print(json.dumps(out))
"""


def two_ranks(rank0, rank1):
    port = str(hostport.free_port("127.0.0.1"))
    env = dict(os.environ, PYTHONPATH=REPO)
    procs = [subprocess.Popen([sys.executable, "-c", TWO_RANKS, str(rank), port, json.dumps(vals)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for rank, vals in enumerate((rank0, rank1))]
    try:
        outs = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [proc.returncode for proc in procs] == [0, 0], [err[-2000:] for _, err in outs]
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]


@INSTALLED
def test_reduce_across_two_ranks_is_the_mean_by_name():
    assert two_ranks({"loss": 1.0, "acc": 0.25}, {"acc": 0.75, "loss": 3.0}) == \
        [{"logged": {"acc": 0.5, "loss": 2.0}}] * 2


@INSTALLED
@pytest.mark.parametrize("rank0, rank1", [({"loss": 10.0}, {"accuracy": 0.5}),
                                          ({"loss": 1.0}, {"loss": 2.0, "acc": 0.5})],
                         ids=["other-names", "one-more-name"])
def test_ranks_that_reduce_other_names_get_a_value_error_naming_theirs(rank0, rank1):
    results = two_ranks(rank0, rank1)
    for result, names in zip(results, (rank0, rank1)):
        assert "logged" not in result, results
        assert "all ranks must log the same names with reduce=" in result["error"]
        assert "this rank's: %s" % ", ".join(sorted(names)) in result["error"]


# -- tfmesos.lightning --------------------------------------------------------------

def test_the_logger_is_a_lightning_logger_that_logs_on_every_rank(torch, points, monkeypatch):
    pl = pytest.importorskip("lightning.pytorch")
    from lightning.fabric.utilities.rank_zero import rank_zero_only

    import tfmesos.lightning
    monkeypatch.setenv(task_env.RUN_ID, "run-1")
    monkeypatch.setattr(rank_zero_only, "rank", 1, raising=False)   # not rank 0
    logger = tfmesos.lightning.MetricsLogger()
    assert isinstance(logger, pl.loggers.Logger)
    assert (logger.name, logger.version, logger.save_dir) == ("tfmesos", "run-1", None)
    logger.log_metrics({"train/loss": torch.tensor(0.5), "epoch": 0}, step=3)
    logger.log_hyperparams({"lr": 0.1})
    logger.log_hyperparams(argparse.Namespace(batch=32))
    assert logger.hyperparams == {"lr": 0.1, "batch": 32}
    assert values(points) == [(3, {"train/loss": 0.5, "epoch": 0.0})]
    named = tfmesos.lightning.MetricsLogger(name="digits", version=7, lightning=pl)
    assert (named.name, named.version, type(named)) == ("digits", 7, type(logger))


def test_a_script_on_pytorch_lightning_gets_its_logger_class(points, monkeypatch):
    pytest.importorskip("lightning.pytorch")
    pytorch_lightning = pytest.importorskip("pytorch_lightning")
    import tfmesos.lightning
    chosen = tfmesos.lightning.MetricsLogger(lightning=pytorch_lightning)
    assert isinstance(chosen, pytorch_lightning.loggers.Logger)
    monkeypatch.delitem(sys.modules, "lightning")    # a script that imported only it
    assert type(tfmesos.lightning.MetricsLogger()) is type(chosen)
    chosen.log_metrics({"loss": 0.5}, step=1)
    assert values(points) == [(1, {"loss": 0.5})]


def test_the_trainer_logs_every_step_through_it(torch, points, tmp_path):
    pl = pytest.importorskip("lightning.pytorch")
    from torch.utils.data import DataLoader, TensorDataset

    import tfmesos.lightning

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)

        def training_step(self, batch, index):
            loss = self.layer(batch[0]).pow(2).mean()
            self.log("loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = DataLoader(TensorDataset(torch.ones(8, 2)), batch_size=2)
    trainer = pl.Trainer(accelerator="cpu", devices=1, max_epochs=1, log_every_n_steps=1,
                         logger=tfmesos.lightning.MetricsLogger(), enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         default_root_dir=str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # Lightning's advice on DataLoader workers
        trainer.fit(Tiny(), data)
    assert [(step, sorted(logged)) for step, logged in values(points)] == \
        [(step, ["epoch", "loss"]) for step in range(4)]
    json.dumps(points, allow_nan=False)   # what travels to tfrun
