"""Exceptions raised by tfmesos.

Every error tfmesos raises on purpose derives from ``TFMesosError``::

    TFMesosError
    ├── SpecError (ValueError)          a job spec or option is invalid
    ├── MasterAddressError (ValueError) a master string cannot be parsed
    ├── MesosError                      talking to Mesos failed
    │   ├── MesosConnectionError (ConnectionError)  no master reachable
    │   ├── MesosCallError              a call was refused (HTTP status kept)
    │   │   └── FrameworkFailedOver     refused: another scheduler holds the
    │   │                               framework now (the stream ID)
    │   └── DriverAborted               a scheduler callback raised (its error
    │                                   is ``__cause__``)
    ├── RendezvousError                 the task rendezvous failed
    ├── ClusterError                    the TensorFlow cluster failed
    │   ├── LaunchTimeout (TimeoutError)  not complete within the deadline
    │   ├── TaskFailed                  a task ended badly (state, exit code)
    │   │   └── RemoteTaskError         tfmesos.run's function raised in a task
    │   │                               (its exception, when it unpickles, is
    │   │                               ``__cause__``; the remote traceback's
    │   │                               text is in the message)
    │   ├── RunKilled                   tfmesos kill took the run's framework
    │   │                               over and removed it (``by``: who)
    │   └── SchedulerReplaced           another scheduler took the run's
    │                                   framework over (this one lets go)
    ├── DockerError                     the Docker engine or image is missing
    └── ShipError                       what a run ships cannot be (too big, a
                                        link out, likely secrets): ``ship.contents``

The embedded master (``mesos_local``) has a tree of its own
(``mesos_local.errors``); where tfmesos uses it, its errors become these at
one boundary, ``raise ... from``: an impossible agent or credentials a
``SpecError``, anything else a ``MesosError`` (``backends.sizing``), the
Docker engine's a ``DockerError`` (``cli.docker_wrapper``).

An error about what a caller gave names the ``RunSpec`` fields it is about
(``TFMesosError.about``, ``error_fields``); ``tfrun`` words it in its flags,
``cluster()`` and ``tfmesos.run()`` in their keyword arguments, each at its
one boundary (``in_words``).
"""

import copy
from collections.abc import Mapping
from typing import Any, Optional, TypeVar

_E = TypeVar("_E", bound="TFMesosError")


class TFMesosError(Exception):
    """Root of every error tfmesos raises on purpose.

    One about what a caller gave names the run's fields it is about, never
    a command-line flag or a keyword argument (``error_fields``): made by
    ``about(template, *values, **context)``, its ``template`` names them as
    ``{launch_timeout}``, ``{ship.max_size=%s}``; ``str()`` says them in the
    spec's words, ``in_words(words)`` is the same error in a caller's, made
    at each caller's one boundary (tfrun: its flags; ``cluster()``,
    ``tfmesos.run()``: their keyword arguments)."""

    template: Optional[str] = None   # None: the message is all there is
    values: tuple = ()
    context: Mapping[str, Any] = {}   # never changed: ``about`` gives each its own

    @classmethod
    def about(cls: type[_E], template: str, *values: Any, **context: Any) -> _E:
        """An error whose message is ``template`` (fields as ``{field}``,
        values as %-slots) with ``values``; ``context``: ``job``, the name of
        the job that ``{job.*}`` fields are of."""
        from .error_fields import check, render
        check(template)
        error = cls(render(template, values, context))
        error.template, error.values, error.context = template, tuple(values), dict(context)
        return error

    @classmethod
    def like(cls: type[_E], error: BaseException, prefix: str = "") -> _E:
        """``error``'s message after ``prefix`` as this class, its fields still
        to be worded by the caller's boundary."""
        if isinstance(error, TFMesosError) and error.template is not None:
            return cls.about(prefix.replace("%", "%%") + error.template, *error.values,
                             **error.context)
        return cls(prefix + str(error))

    @property
    def fields(self) -> tuple:
        """The fields the message names (none for a message made whole)."""
        from .error_fields import fields_of
        return fields_of(self.template) if self.template is not None else ()

    def in_words(self: _E, words: Mapping[str, Any]) -> _E:
        """This error naming its fields in ``words`` (a caller's table,
        ``error_fields``): a new one of the same class, without a traceback;
        this one itself when it names none."""
        if self.template is None:
            return self
        from .error_fields import render
        error = copy.copy(self)
        error.args = (render(self.template, self.values, self.context, words),)
        return error


class SpecError(TFMesosError, ValueError):
    """A job spec or run option is invalid."""


class MasterAddressError(TFMesosError, ValueError):
    """A Mesos master string cannot be parsed."""


class MesosError(TFMesosError):
    """Talking to the Mesos master failed. ``maybe_delivered``: the master
    may have carried the call out all the same (``MesosConnectionError``)."""

    maybe_delivered: bool = False

    @property
    def means_disconnected(self) -> bool:
        """True when the call failed only because the subscription is gone:
        the driver re-subscribes, and Mesos rescinds offers / re-sends updates."""
        return False


class MesosConnectionError(MesosError, ConnectionError):
    """No Mesos master could be reached. ``maybe_delivered``: the call was
    sent whole and its answer never came (a timeout, a connection that
    dropped meanwhile): the master may have carried it out."""

    def __init__(self, message: str = "", maybe_delivered: bool = False) -> None:
        super().__init__(message)
        self.maybe_delivered = maybe_delivered

    @property
    def means_disconnected(self) -> bool:
        return True


FRAMEWORK_NOT_FOUND = "Framework cannot be found"   # Mesos' 400 for an unknown framework


class MesosCallError(MesosError):
    """The master refused a call; ``status`` holds the HTTP status code."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status

    @property
    def means_disconnected(self) -> bool:
        # Mesos answers 403 "Framework is not subscribed" to a call made
        # between a lost subscription and the next SUBSCRIBED; a master that
        # does not lead answers 503 ("Not the leading master", "Master has not
        # finished recovery") or 307 to the leader before it looks at the
        # call (src/master/http.cpp, Master::Http::scheduler): nothing was
        # carried out, and the subscription moves to the leader. So is 400
        # "Framework cannot be found", answered there before the call too:
        # the master has no such framework (an operator's teardown, which
        # also ends the stream: the re-subscription learns it was removed).
        return self.status in (307, 403, 503) or (
            self.status == 400 and FRAMEWORK_NOT_FOUND in str(self))


class FrameworkFailedOver(MesosCallError):
    """A call of this scheduler's subscription was refused because another
    subscription of its framework replaced it: Mesos answers 400 "The
    stream ID ... didn't match the stream ID currently associated with
    framework ID ..." (src/master/http.cpp, ``Master::Http::scheduler``)
    before the ERROR "Framework failed over" reaches the old stream. Its
    message says ``FAILED_OVER`` (mesos.interface) first."""


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


class RunKilled(ClusterError):
    """The run was killed from outside: ``tfmesos kill`` subscribed as its
    framework (Mesos answered this scheduler "Framework failed over") and
    removed it, which kills every task. ``by``: the Mesos principal, else
    the user, that killed it (None when unknown)."""

    def __init__(self, message, by=None):
        super().__init__(message)
        self.by = by


class SchedulerReplaced(ClusterError):
    """Another scheduler subscribed as the run's framework (Mesos answered
    this one "Framework failed over") without killing the run: the run is
    its now; this one leaves the tasks to it."""


class DockerError(TFMesosError):
    """The Docker engine or an image is not available."""
