"""tfmesos: run distributed TensorFlow on Apache Mesos, or on an embedded
local master when no cluster is at hand.

The public names below are imported on first use, so that the task entry
point (``python -m tfmesos.task``, once per task) pays only for what it
imports itself.

The package, top down (docs/architecture.md): ``cli/`` (tfrun, tfmesos),
``core/`` (the run: spec, scheduling, failure policy, lifecycle),
``backends/`` (where the run's master lives), ``record/`` (run.json, the
logs and their readers), ``ship/`` (tfrun --ship), ``mesos/`` (the Mesos
scheduler driver), ``protocol/`` and ``task/`` (what tasks run).
"""

from .lazy_exports import lazy_exports

__version__ = "0.1.0"

_EXCEPTIONS = ("TFMesosError", "SpecError", "MasterAddressError", "MesosError",
               "MesosConnectionError", "MesosCallError", "FrameworkFailedOver", "DriverAborted",
               "RendezvousError",
               "ClusterError", "LaunchTimeout", "TaskFailed", "RemoteTaskError", "RunKilled",
               "SchedulerReplaced", "DockerError")
_EXPORTS = {"Cluster": ".core.fine_grained", "cluster": ".core.fine_grained",
            "run": ".core.function_run", "submit": ".core.function_submit",
            "RunResult": ".core.run_result",
            "Job": ".core.jobs", "RunSpec": ".core.spec",
            "log_metrics": ".task.user_metrics", "MetricsWarning": ".task.user_metrics",
            **{name: ".exceptions" for name in _EXCEPTIONS}}
# Submodules imported on first use: ``tfmesos.keras.MetricsCallback``,
# ``tfmesos.torch.log_metrics``, ``tfmesos.lightning.MetricsLogger``.
_SUBMODULES = ("keras", "torch", "lightning")

__all__ = sorted(_EXPORTS) + ["__version__"]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS, _SUBMODULES)
