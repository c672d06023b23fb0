"""The Mesos protocol layer: a v1 HTTP scheduler driver with pymesos'
interface, master detection (including ``zk://``) and an embedded local
master. Nothing here knows about TensorFlow."""

from addict import Dict

from .calls import decode_data, encode_data
from .driver import DRIVER_ABORTED, DRIVER_RUNNING, DRIVER_STOPPED, MesosSchedulerDriver
from .interface import Scheduler

__all__ = ["Dict", "MesosSchedulerDriver", "Scheduler", "encode_data", "decode_data",
           "DRIVER_RUNNING", "DRIVER_STOPPED", "DRIVER_ABORTED"]
