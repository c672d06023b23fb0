"""A run's identity: who it is, made in exactly one place (``RunIdentity.new``)
and passed as one value from there on.

* ``run_id``: 8 hex digits, in every task id and in the framework's labels;
* ``key``: 32 random bytes, the rendezvous' HMAC key (``protocol.wire``)
  and the key that signs what the run leaves where others can write
  (``sign``/``verify``: a detached run's scheduler document, the framework's
  proof label); it never appears in ``public()`` nor in ``repr``;
* ``framework_id``: the run's Mesos framework once subscribed;
* ``principal``, ``user``: the Mesos principal the run authenticates as
  (None: the master asks for none) and the user its tasks run as;
* ``bundle_sha256``, ``task_side_sha256``, ``python_env_sha256``: what
  ``--ship`` packed (the user's files and tfmesos' task side) and the
  ``--python-env`` archive it served (a file's; None for a URL, which the
  tasks fetch themselves); a takeover serves exactly these;
* ``scheduler_attempt``: which scheduler of the run this is (1: the one
  that started it; each takeover adds one).

A scheduler that takes a run over rebuilds the identity from what the run
left (``from_public`` with the key the caller holds) and never from a
document it has not verified with that key.
"""

import dataclasses
import hashlib
import hmac
import re
import secrets
from typing import Any, Optional

from ..exceptions import TFMesosError
from ..field_methods import FrozenFieldMethods

KEY_BYTES = 32
RUN_ID = re.compile(r"^[0-9a-f]{8}\Z")
_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
# What a signature says it covers, so that a signature of one kind of
# document is never taken for another's.
DOCUMENT_CONTEXT = b"tfmesos scheduler document v1\n"
FRAMEWORK_CONTEXT = b"tfmesos framework v1\n"


class IdentityError(TFMesosError, ValueError):
    """What claims to be a run's identity is not one; the message names why."""


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class RunIdentity(FrozenFieldMethods):
    """Who a run is (module docstring); frozen: a new stage of the run is a
    new value (``with_framework``, ``with_shipment``, ``next_scheduler``)."""

    run_id: str
    key: bytes = dataclasses.field(repr=False)
    user: str
    principal: Optional[str] = None
    framework_id: Optional[str] = None
    bundle_sha256: Optional[str] = None
    task_side_sha256: Optional[str] = None
    python_env_sha256: Optional[str] = None
    scheduler_attempt: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.run_id, str) or not RUN_ID.match(self.run_id):
            raise IdentityError("%r is not a run id (8 hex digits)" % (self.run_id,))
        if not isinstance(self.key, bytes) or len(self.key) != KEY_BYTES:
            raise IdentityError("a run's key is %d bytes" % KEY_BYTES)
        if not isinstance(self.user, str) or not self.user:
            raise IdentityError("a run's user must be a non-empty string")
        for name in ("principal", "framework_id"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, str) and value):
                raise IdentityError("a run's %s must be a non-empty string or None" % name)
        for name in ("bundle_sha256", "task_side_sha256", "python_env_sha256"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, str) and _SHA256.match(value)):
                raise IdentityError("a run's %s must be 64 hex digits or None" % name)
        attempt = self.scheduler_attempt
        if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
            raise IdentityError("a run's scheduler attempt must be a whole number >= 1")

    @classmethod
    def new(cls, user: str, principal: Optional[str] = None) -> "RunIdentity":
        """A new run's identity: a fresh run id and key (the only place
        either is made)."""
        return cls(run_id=secrets.token_hex(4), key=secrets.token_bytes(KEY_BYTES), user=user,
                   principal=principal)

    # -- the stages of a run ---------------------------------------------------

    def with_framework(self, framework_id: str) -> "RunIdentity":
        return dataclasses.replace(self, framework_id=framework_id)

    def with_shipment(self, bundle_sha256: Optional[str], task_side_sha256: Optional[str],
                      python_env_sha256: Optional[str] = None) -> "RunIdentity":
        return dataclasses.replace(self, bundle_sha256=bundle_sha256,
                                   task_side_sha256=task_side_sha256,
                                   python_env_sha256=python_env_sha256)

    def next_scheduler(self) -> "RunIdentity":
        """The identity a scheduler taking the run over runs with."""
        return dataclasses.replace(self, scheduler_attempt=self.scheduler_attempt + 1)

    # -- what may be written where others can read -----------------------------

    def public(self) -> dict:
        """Every field but the key, as JSON."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)
                if field.name != "key"}

    @classmethod
    def from_public(cls, data: Any, key: bytes) -> "RunIdentity":
        """The identity ``public()`` wrote, with ``key``; IdentityError for
        anything that is not one."""
        if not isinstance(data, dict):
            raise IdentityError("a run's identity must be a JSON object")
        known = {field.name for field in dataclasses.fields(cls)} - {"key"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise IdentityError("unknown field(s) in a run's identity: %s (a newer tfmesos wrote "
                                "it?): take the run over with the tfmesos that started it"
                                % ", ".join(unknown))
        try:
            return cls(key=key, **data)
        except TypeError as exc:
            raise IdentityError("malformed run identity: %s" % exc) from None

    # -- signatures -----------------------------------------------------------------

    def sign(self, data: bytes, context: bytes = DOCUMENT_CONTEXT) -> str:
        """HMAC-SHA256 of ``data`` with the run's key, hex."""
        return sign(self.key, data, context)

    def verify(self, data: bytes, signature: Any, context: bytes = DOCUMENT_CONTEXT) -> bool:
        return verify(self.key, data, signature, context)

    def seal(self, payload: bytes) -> bytes:
        """``payload`` signed (``unseal`` checks it): what a scheduler
        document is on disk and in a sandbox."""
        return seal(self.key, payload)

    def framework_proof(self) -> str:
        """What the run's framework carries to show it is this run's
        (``protocol.labels.PROOF``): the signature of its id, run id,
        principal and user, which nobody without the key can make for
        another framework."""
        if self.framework_id is None:
            raise IdentityError("the run has no framework yet")
        return self.sign(proof_text(self.run_id, self.framework_id, self.principal, self.user),
                         FRAMEWORK_CONTEXT)

    def proves(self, framework_id: str, principal: Optional[str], user: str,
               proof: Any) -> bool:
        """Whether ``proof`` shows the framework of that id, principal and
        user to be this run's."""
        return self.verify(proof_text(self.run_id, framework_id, principal, user), proof,
                           FRAMEWORK_CONTEXT)


def sign(key: bytes, data: bytes, context: bytes = DOCUMENT_CONTEXT) -> str:
    """HMAC-SHA256 of ``context`` + ``data`` with ``key``, hex."""
    return hmac.new(key, context + data, hashlib.sha256).hexdigest()


def verify(key: bytes, data: bytes, signature: Any, context: bytes = DOCUMENT_CONTEXT) -> bool:
    return isinstance(signature, str) and hmac.compare_digest(sign(key, data, context),
                                                              signature)


def seal(key: bytes, payload: bytes) -> bytes:
    """A sealed document: the hex signature of ``payload``, a newline, then
    ``payload`` itself (its bytes as signed)."""
    return sign(key, payload).encode("ascii") + b"\n" + payload


def unseal(key: bytes, data: bytes, what: str = "the document") -> bytes:
    """The payload of a sealed document ``data`` once its signature checks
    with ``key``; IdentityError, naming ``what``, before any byte of the
    payload is used."""
    signature, newline, payload = data.partition(b"\n")
    try:
        text = signature.decode("ascii")
    except UnicodeDecodeError:
        text = ""
    if not newline or not verify(key, payload, text):
        raise IdentityError("%s is not signed with this run's key: it was not written by the "
                            "run's submitter (or it was changed since); nothing of it is used"
                            % what)
    return payload


def proof_text(run_id: str, framework_id: str, principal: Optional[str], user: str) -> bytes:
    return "\n".join((run_id, framework_id, principal or "", user)).encode("utf-8")


__all__ = ["RunIdentity", "IdentityError", "KEY_BYTES", "seal", "unseal", "sign", "verify"]
