"""Exceptions raised by tfmesos.

Every error tfmesos raises on purpose derives from ``TFMesosError``::

    TFMesosError
    ├── SpecError (ValueError)          a job spec or option is invalid
    ├── MasterAddressError (ValueError) a master string cannot be parsed
    ├── MesosError                      talking to Mesos failed
    │   ├── MesosConnectionError (ConnectionError)  no master reachable
    │   ├── MesosCallError              a call was refused (HTTP status kept)
    │   └── DriverAborted               a scheduler callback raised (its error
    │                                   is ``__cause__``)
    ├── RendezvousError                 the task rendezvous failed
    ├── ClusterError                    the TensorFlow cluster failed
    │   ├── LaunchTimeout (TimeoutError)  not complete within the deadline
    │   └── TaskFailed                  a task ended badly (state, exit code)
    │       └── RemoteTaskError         tfmesos.run's function raised in a task
    │                                   (its exception, when it unpickles, is
    │                                   ``__cause__``; the remote traceback's
    │                                   text is in the message)
    └── DockerError                     the Docker engine or image is missing

The embedded master (``mesos_local``) has a tree of its own
(``mesos_local.errors``); where tfmesos uses it, its errors become these at
one boundary, ``raise ... from``: an impossible agent or credentials a
``SpecError``, anything else a ``MesosError`` (``backends.sizing``), the
Docker engine's a ``DockerError`` (``cli.docker_wrapper``).
"""


class TFMesosError(Exception):
    """Root of every error tfmesos raises on purpose."""


class SpecError(TFMesosError, ValueError):
    """A job spec or run option is invalid."""


class MasterAddressError(TFMesosError, ValueError):
    """A Mesos master string cannot be parsed."""


class MesosError(TFMesosError):
    """Talking to the Mesos master failed."""

    @property
    def means_disconnected(self) -> bool:
        """True when the call failed only because the subscription is gone:
        the driver re-subscribes, and Mesos rescinds offers / re-sends updates."""
        return False


class MesosConnectionError(MesosError, ConnectionError):
    """No Mesos master could be reached."""

    @property
    def means_disconnected(self) -> bool:
        return True


class MesosCallError(MesosError):
    """The master refused a call; ``status`` holds the HTTP status code."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status

    @property
    def means_disconnected(self) -> bool:
        # Mesos answers 403 "Framework is not subscribed" to a call made
        # between a lost subscription and the next SUBSCRIBED.
        return self.status == 403


class DriverAborted(MesosError):
    """A scheduler callback raised, so the driver stopped calling back; the
    callback's exception is ``__cause__``."""


class RendezvousError(TFMesosError):
    """The rendezvous between the scheduler and its tasks failed."""


class ClusterError(TFMesosError):
    """The TensorFlow cluster could not be built or failed while running."""


class LaunchTimeout(ClusterError, TimeoutError):
    """The cluster was not complete within the launch timeout."""


class TaskFailed(ClusterError):
    """A task ended badly; carries its name, Mesos state and exit code."""

    def __init__(self, message, task=None, state=None, exit_code=None):
        super().__init__(message)
        self.task = task
        self.state = state
        self.exit_code = exit_code


class RemoteTaskError(TaskFailed):
    """The function of ``tfmesos.run`` raised in a task (or its value could
    not come back): ``task`` names it (``worker:1``), ``remote_traceback``
    is the traceback's text as the task formatted it, also in the message;
    the exception itself is ``__cause__`` when it unpickles here."""

    def __init__(self, message, task=None, state=None, exit_code=None, remote_traceback=""):
        super().__init__(message, task, state, exit_code)
        self.remote_traceback = remote_traceback


class DockerError(TFMesosError):
    """The Docker engine or an image is not available."""
