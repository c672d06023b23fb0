"""What a run that outlives its scheduler leaves for the next one
(``tfrun --failover``, ``--detach``; ``tfmesos attach``).

* ``failover.json`` in the run directory: the run's identity (its
  ``RunIdentity.public()``: no key), master, tfrun's options and command
  (``argv``) and the directory it ran in, so that ``tfmesos attach`` can
  carry on as tfrun would have; no secret.
* the run's key (its rendezvous secret) under ``$TFMESOS_KEYS_DIR``, else
  ``~/.tfmesos/keys``, one file per run id, readable by its owner only: the
  tasks authenticate the scheduler that takes the run over with it, so
  whoever attaches from another machine copies it there
  (``tfmesos attach --key FILE``).
"""

import json
import os
import re

from ..exceptions import TFMesosError

FAILOVER_FILE = "failover.json"
KEY_BYTES = 32
_RUN_ID = re.compile(r"^[0-9a-f]{1,64}$")


class TakeoverError(TFMesosError):
    """A run cannot be taken over; the message is one line naming the fix."""


def keys_dir(environ):
    return environ.get("TFMESOS_KEYS_DIR") or os.path.join(
        os.path.expanduser("~"), ".tfmesos", "keys")


def key_path(run_id, environ):
    if not _RUN_ID.match(run_id):
        raise TakeoverError("%r is not a run id" % run_id)
    return os.path.join(keys_dir(environ), run_id)


def _write_private(path, text):
    """``text`` to ``path``, mode 0600 from its creation, atomically."""
    temporary = "%s.tmp%d" % (path, os.getpid())
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                         0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


def save_key(identity, environ):
    """Keep the key of the run ``identity`` (a ``RunIdentity``); returns where."""
    path = key_path(identity.run_id, environ)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    _write_private(path, identity.key.hex() + "\n")
    return path


def read_key(path):
    """The secret in a key file ``path``; TakeoverError naming the problem."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(4 * KEY_BYTES).strip()
    except OSError as exc:
        raise TakeoverError("cannot read the run's key %s (%s): copy it from the machine that "
                            "submitted the run (tfmesos attach --key FILE)"
                            % (path, exc.strerror or exc)) from None
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) != KEY_BYTES:
        raise TakeoverError("%s is not a tfmesos run key (%d hex digits)" % (path, 2 * KEY_BYTES))
    return secret


def save_failover(directory, identity, master, argv, cwd):
    if directory is None:
        return
    _write_private(os.path.join(directory, FAILOVER_FILE), json.dumps(
        {"identity": identity.public(), "master": master, "argv": list(argv), "cwd": cwd},
        indent=1) + "\n")


def read_failover(directory):
    """failover.json of a run directory as a dict; TakeoverError if none."""
    path = os.path.join(directory, FAILOVER_FILE)
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.loads(handle.read(1 << 20))
    except FileNotFoundError:
        raise TakeoverError("run %s was not started with --failover or --detach: there is "
                            "nothing to take over (its tasks stopped with its tfrun)"
                            % os.path.basename(directory)) from None
    except (OSError, ValueError) as exc:
        raise TakeoverError("cannot read %s: %s" % (path, exc)) from None
    identity = data.get("identity") if isinstance(data, dict) else None
    if not isinstance(identity, dict) or not all(
            isinstance(identity.get(k), str) for k in ("run_id", "framework_id")) \
            or not all(isinstance(data.get(k), str) for k in ("master", "cwd")) \
            or not isinstance(data.get("argv"), list) \
            or not all(isinstance(word, str) for word in data["argv"]):
        raise TakeoverError("%s is not a tfmesos failover file" % path)
    return data
