"""tfmesos: run distributed TensorFlow on Apache Mesos, or on an embedded
local master when no cluster is at hand.

The public names below are imported on first use, so that the task entry
point (``python -m tfmesos.task``, once per task) pays only for what it
imports itself.
"""

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "Cluster": "fine_grained", "cluster": "fine_grained",
    "Job": "spec", "RunSpec": "spec",
    "TFMesosError": "exceptions", "SpecError": "exceptions",
    "MasterAddressError": "exceptions", "MesosError": "exceptions",
    "MesosConnectionError": "exceptions", "MesosCallError": "exceptions",
    "DriverAborted": "exceptions",
    "RendezvousError": "exceptions", "ClusterError": "exceptions",
    "LaunchTimeout": "exceptions", "TaskFailed": "exceptions", "DockerError": "exceptions",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError("module 'tfmesos' has no attribute %r" % name)
    value = getattr(importlib.import_module("." + module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
