"""The Mesos protocol layer: a v1 HTTP scheduler driver with pymesos'
interface, master detection (including ``zk://``) and an embedded local
master. Nothing here knows about TensorFlow.

The public names below are imported on first use: a module that needs only
``tfmesos.mesos.master_address`` (e.g. to check a master string) does not
pay for the driver and its HTTP client."""

import importlib

_EXPORTS = {
    "Dict": "addict", "MesosSchedulerDriver": ".driver", "Scheduler": ".interface",
    "encode_data": ".calls", "decode_data": ".calls", "DRIVER_RUNNING": ".driver",
    "DRIVER_STOPPED": ".driver", "DRIVER_ABORTED": ".driver",
}

__all__ = ["Dict", "MesosSchedulerDriver", "Scheduler", "encode_data", "decode_data",
           "DRIVER_RUNNING", "DRIVER_STOPPED", "DRIVER_ABORTED"]


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError("module 'tfmesos.mesos' has no attribute %r" % name)
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
