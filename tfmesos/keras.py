"""``tfmesos.keras.MetricsCallback``: a Keras callback that logs what
``fit()`` reports (loss, accuracy, ``val_*``, ...) with
``tfmesos.log_metrics``, at the end of every epoch and, with
``every_n_batches=N``, every N training batches.

    model.fit(dataset, epochs=5, callbacks=[tfmesos.keras.MetricsCallback()])

It works with Keras 3 (any backend: TensorFlow, JAX, ...) and with Keras 2
as ``tf_keras`` (``pip install tf-keras``; TensorFlow's multi-worker Keras):
it is a callback of ``tf_keras`` when the process imported ``tf_keras``,
else of ``keras`` (``keras=`` chooses: the module). Keras is imported when
the first callback is made, never by ``import tfmesos``.

Steps are training batches: the epoch's end logs at ``(epoch + 1) x
steps per epoch`` (when fit() knows it), so a batch's values and an
epoch's lie on one axis across a restart that resumes at a later epoch
(``BackupAndRestore``). Values that are not numbers are left out.
"""

import sys
from typing import Any

from .task.user_metrics import log_metrics

_classes: dict[str, tuple[type, type]] = {}   # keras module's name -> its callback classes


def _keras_module(keras):
    if keras is not None:
        return keras
    if "tf_keras" in sys.modules:
        return sys.modules["tf_keras"]
    import keras as keras_3  # Keras 3, or whatever Keras is installed as ``keras``
    return keras_3


def _numbers(logs):
    """The number-valued entries of Keras' ``logs`` as floats."""
    found = {}
    for name, value in (logs or {}).items():
        try:
            found[str(name)] = float(value)
        except (TypeError, ValueError):
            continue
    return found


def _class_for(keras):
    """The callback class deriving from ``keras.callbacks.Callback``."""
    key = keras.__name__
    if key in _classes:
        return _classes[key]
    base: Any = keras.callbacks.Callback   # known only once Keras is imported

    class KerasMetricsCallback(base):
        __doc__ = MetricsCallback.__doc__

        def __init__(self, every_n_batches=None):
            super().__init__()
            if every_n_batches is not None and (not isinstance(every_n_batches, int)
                                                or every_n_batches < 1):
                raise ValueError("every_n_batches must be a positive integer or None, not %r"
                                 % (every_n_batches,))
            self.every_n_batches = every_n_batches
            self._epoch = 0
            self._batches = 0      # batches this process trained (steps per epoch unknown)

        def _steps_per_epoch(self):
            steps = (getattr(self, "params", None) or {}).get("steps")
            return steps if isinstance(steps, int) and steps > 0 else None

        def on_epoch_begin(self, epoch, logs=None):
            self._epoch = epoch

        def on_epoch_end(self, epoch, logs=None):
            steps = self._steps_per_epoch()
            step = (epoch + 1) * steps if steps else max(self._batches, epoch + 1)
            values = _numbers(logs)
            if values:
                log_metrics(step=step, **values)

    class KerasBatchMetricsCallback(KerasMetricsCallback):
        __doc__ = MetricsCallback.__doc__

        def on_train_batch_end(self, batch, logs=None):
            self._batches += 1
            steps = self._steps_per_epoch()
            step = self._epoch * steps + batch + 1 if steps else self._batches
            if self.every_n_batches and step % self.every_n_batches == 0:   # made with one
                values = _numbers(logs)
                if values:
                    log_metrics(step=step, **values)

    _classes[key] = (KerasMetricsCallback, KerasBatchMetricsCallback)
    return _classes[key]


class MetricsCallback:
    """A Keras callback logging ``fit()``'s metrics with ``tfmesos.log_metrics``:
    each epoch's (at its last step), and with ``every_n_batches=N`` every Nth
    training batch's. ``keras``: the Keras module whose callback it is
    (default ``tf_keras`` when imported, else ``keras``). What it makes is an
    instance of ``keras.callbacks.Callback``."""

    def __new__(cls, every_n_batches=None, keras=None):
        epoch_only, with_batches = _class_for(_keras_module(keras))
        return (with_batches if every_n_batches else epoch_only)(every_n_batches)
