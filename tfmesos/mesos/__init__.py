"""The Mesos protocol layer: a v1 HTTP scheduler driver with pymesos'
interface (``driver``, over a transport: ``transport``, ``mock_transport``)
and master detection (including ``zk://``). Nothing here knows about
TensorFlow; the embedded master is a package of its own, ``mesos_local``.

The public names below are imported on first use: a module that needs only
``tfmesos.mesos.master_address`` (e.g. to check a master string) does not
pay for the driver and its HTTP client."""

from ..lazy_exports import lazy_exports

__all__ = ["Dict", "MesosSchedulerDriver", "Scheduler", "encode_data", "decode_data",
           "DRIVER_RUNNING", "DRIVER_STOPPED", "DRIVER_ABORTED"]
__getattr__, __dir__ = lazy_exports(__name__, globals(), {
    "Dict": "addict", "MesosSchedulerDriver": ".driver", "Scheduler": ".interface",
    "encode_data": ".calls", "decode_data": ".calls", "DRIVER_RUNNING": ".driver",
    "DRIVER_STOPPED": ".driver", "DRIVER_ABORTED": ".driver",
})
