"""``tfmesos.lightning.MetricsLogger``: a PyTorch Lightning logger that
sends what ``self.log(...)`` records to ``tfmesos.log_metrics`` (tfrun's
status line, run.json, ``tfmesos show``, the report, MLflow).

    trainer = lightning.pytorch.Trainer(..., logger=tfmesos.lightning.MetricsLogger(),
                                        log_every_n_steps=10)

It logs from **every rank**: Lightning's own loggers write on rank 0 only
(their ``log_metrics`` is ``@rank_zero_only``), as they share one
directory or server; tfmesos keeps a series per task, so each task logs
its own values (a rank's own batch's ``train_loss``; values logged with
``sync_dist=True`` are alike in every task). Steps are Lightning's (the
optimizer steps taken, ``trainer.global_step`` in one-optimizer loops);
Lightning adds ``epoch``. ``log_hyperparams`` keeps the hyperparameters in
``.hyperparams`` (tfmesos records none). With other loggers, give a list:
``logger=[CSVLogger("logs"), MetricsLogger()]``.

It is a logger of ``lightning.pytorch`` (``pip install lightning``), or of
``pytorch_lightning`` when the process imported that and not ``lightning``
(``lightning=`` chooses: either module); the same class serves Lightning
Fabric (``Fabric(loggers=...)``, ``fabric.log_dict``). Lightning is
imported when the first logger is made, never by ``import tfmesos``.
"""

import os
import sys
from typing import Any

from .protocol import task_env
from .task.user_metrics import log_values

_classes: dict[str, type] = {}   # Lightning module's name -> its logger class


def _lightning_module(lightning):
    """The ``lightning.pytorch`` or ``pytorch_lightning`` module."""
    if lightning is not None:
        return getattr(lightning, "pytorch", lightning)   # ``lightning`` or its ``.pytorch``
    if "pytorch_lightning" in sys.modules and "lightning" not in sys.modules:
        return sys.modules["pytorch_lightning"]
    import lightning.pytorch as pytorch
    return pytorch


def _class_for(lightning):
    key = lightning.__name__
    if key in _classes:
        return _classes[key]
    base: Any = lightning.loggers.Logger   # known only once Lightning is imported

    class LightningMetricsLogger(base):
        __doc__ = MetricsLogger.__doc__

        def __init__(self, name="tfmesos", version=None):
            super().__init__()
            self._name = name
            self._version = version
            self.hyperparams: dict = {}

        @property
        def name(self):
            return self._name

        @property
        def version(self):
            # the run's id in a tfrun task: Lightning names its checkpoints'
            # directory after it (<default_root_dir>/<name>/<version>/)
            if self._version is None:
                self._version = os.environ.get(task_env.RUN_ID) or "0"
            return self._version

        def log_metrics(self, metrics, step=None):
            # not @rank_zero_only: every rank's task logs its own
            log_values(step, dict(metrics))

        def log_hyperparams(self, params, *args, **kwargs):
            self.hyperparams.update(params if isinstance(params, dict) else vars(params))

    _classes[key] = LightningMetricsLogger
    return LightningMetricsLogger


class MetricsLogger:
    """A Lightning logger sending ``self.log()``'s values to
    ``tfmesos.log_metrics`` from every rank. ``name`` (default "tfmesos")
    and ``version`` (default: the tfrun run's id, else "0") are what
    Lightning names its directories after. ``lightning``: the module
    (``lightning``, ``lightning.pytorch`` or ``pytorch_lightning``; default
    ``lightning.pytorch`` unless only ``pytorch_lightning`` is imported).
    What it makes is an instance of that module's ``loggers.Logger``."""

    def __new__(cls, name="tfmesos", version=None, lightning=None):
        return _class_for(_lightning_module(lightning))(name, version)
