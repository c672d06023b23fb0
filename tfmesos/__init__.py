"""tfmesos: run distributed TensorFlow on Apache Mesos, or on an embedded
local master when no cluster is at hand."""

from .cluster import Cluster, cluster
from .exceptions import (ClusterError, DockerError, LaunchTimeout, MasterAddressError,
                         MesosCallError, MesosConnectionError, MesosError, RendezvousError,
                         SpecError, TaskFailed, TFMesosError)
from .spec import Job, RunSpec

__version__ = "0.1.0"

__all__ = ["Cluster", "cluster", "Job", "RunSpec", "TFMesosError", "SpecError",
           "MasterAddressError", "MesosError", "MesosConnectionError", "MesosCallError",
           "RendezvousError", "ClusterError", "LaunchTimeout", "TaskFailed", "DockerError",
           "__version__"]
