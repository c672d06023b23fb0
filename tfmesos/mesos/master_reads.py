"""A Mesos master read from outside any framework: its state and the
teardown of a framework, as ``tfmesos runs --master`` and ``tfmesos kill``
need them, the same on a Mesos cluster and on ``tfmesos local-master``.

* ``GET /master/state`` (docs/endpoints/master/state.md): frameworks,
  completed frameworks and their tasks; not authenticated by default;
* ``GET /master/frameworks?framework_id=ID`` and ``GET
  /master/slaves?slave_id=ID`` (frameworks.md, slaves.md): one framework
  (its tasks, labels, connection) or one agent, what a follower polls
  instead of the whole state;
* ``POST /api/v1`` ``GET_FRAMEWORKS`` (docs/operator-http-api.md): a
  framework's ``FrameworkInfo`` as the master holds it, which ``tfmesos
  kill`` subscribes with (``failover_teardown``);
* ``POST /master/teardown`` with ``frameworkId=ID`` (docs/endpoints/master/
  teardown.md): kills the framework's tasks and removes it; authenticated
  when the master asks for credentials (``MESOS_PRINCIPAL`` and
  ``MESOS_SECRET``, as the driver sends them).

The operator event stream (``operator_stream``: what a follower reads
instead of polling) is reached as these are: ``leader()``, ``auth``,
``tls``, ``timeout``.

The leader is found as the driver finds it (a fixed list or ``zk://``), and a
307 from a master that does not lead is followed once.
"""

import json
import os
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any, Optional

from ..exceptions import MesosConnectionError, MesosError
from ..terminal_text import quoted
from .detection import make_detector
from .detector import UNREACHED_WAIT, Detector
from .http_transport import TLSContext, basic_auth, basic_principal, describe, open_connection, redirect_base
from .master_address import parse_master, with_password

MAX_STATE = 256 * 1024 * 1024      # bytes of /master/state read at most


class MasterReader:
    def __init__(self, master: str, timeout: float = 10.0,
                 environ: Optional[Mapping[str, str]] = None, verify: bool = True,
                 ca_bundle: Optional[str] = None, scheme: str = "http") -> None:
        environ = os.environ if environ is None else environ
        # A record's master (its ZooKeeper password masked): the password of $MESOS_MASTER.
        self.master = master = with_password(master, environ.get("MESOS_MASTER"))
        spec = parse_master(master)
        if spec.kind == "local":
            raise MesosError("--master local names no master to read: a tfrun's embedded master "
                             "lives only as long as its tfrun; give the address of a Mesos "
                             "master or of a `tfmesos local-master`, e.g. --master 127.0.0.1:5050")
        self._spec, self._timeout, self._scheme = spec, timeout, scheme
        self.auth = basic_auth(environ.get("MESOS_PRINCIPAL"), environ.get("MESOS_SECRET"))
        self.tls = TLSContext(verify, ca_bundle)
        self._leader: Optional[str] = None

    @property
    def timeout(self) -> float:
        """Seconds a connection to the master and each read of it may take."""
        return self._timeout

    def leader(self) -> str:
        if self._leader is None:
            try:
                with make_detector(self._spec, self._timeout, scheme=self._scheme) as detector:
                    self._leader = self._find_leader(detector)
            except MesosError:
                raise
            except Exception as exc:      # a ZooKeeper or detector failure, in one line
                raise MesosError("cannot find the leading Mesos master: %s" % describe(exc)) \
                    from None
        return self._leader

    def _find_leader(self, detector: Detector) -> str:
        """The detector's leader within the timeout, looked for a second at a
        time; but ZooKeeper whose every server refuses, or that refuses the
        credentials, is an error that says so at once (a fixed master that
        refuses is one at once)."""
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                return detector.leader(min(max(0.0, deadline - time.monotonic()),
                                           UNREACHED_WAIT))
            except MesosConnectionError:
                said = detector.denied() if detector.reached() else detector.refusing()
                if said is not None:
                    raise MesosConnectionError(said) from None
                if time.monotonic() >= deadline:
                    raise

    def state(self) -> dict[str, Any]:
        return self._json("/master/state")

    def frameworks(self, framework_id: str) -> dict[str, Any]:
        """``/master/frameworks`` of one framework: ``{"frameworks": [...],
        "completed_frameworks": [...]}`` (a master that ignores the filter
        answers every framework: the caller picks its own)."""
        return self._json("/master/frameworks", framework_id=framework_id)

    def agents(self, agent_id: Optional[str] = None) -> dict[str, Any]:
        """``/master/slaves`` of one agent (None: of every agent):
        ``{"slaves": [...]}``, each with its total ``resources``."""
        if agent_id is None:
            return self._json("/master/slaves")
        return self._json("/master/slaves", slave_id=agent_id)

    def _json(self, path: str, **query: str) -> dict[str, Any]:
        payload = self._request("GET", path + ("?" + urllib.parse.urlencode(query)
                                               if query else ""))
        try:
            document = json.loads(payload)
        except ValueError:
            raise MesosError("the Mesos master at %s answered %s with no JSON"
                             % (self.leader(), path)) from None
        if not isinstance(document, dict):
            raise MesosError("the Mesos master at %s answered %s with no JSON object"
                             % (self.leader(), path))
        return document

    def framework_info(self, framework_id: str) -> Optional[dict]:
        """The ``FrameworkInfo`` (its id included) of the registered
        framework ``framework_id``, as the master holds it (the operator
        API's ``GET_FRAMEWORKS``); None when the master has no such
        framework registered (removed, or never known)."""
        payload = self._request("POST", "/api/v1",
                                json.dumps({"type": "GET_FRAMEWORKS"}).encode("utf-8"),
                                "application/json")
        try:
            answer = json.loads(payload)
            frameworks = answer["get_frameworks"].get("frameworks") or []
        except (ValueError, KeyError, AttributeError, TypeError):
            raise MesosError("the Mesos master at %s answered GET_FRAMEWORKS with no "
                             "frameworks" % self.leader()) from None
        for framework in frameworks:
            info = framework.get("framework_info") if isinstance(framework, dict) else None
            if isinstance(info, dict) and (info.get("id") or {}).get("value") == framework_id:
                return info
        return None

    def teardown(self, framework_id: str) -> None:
        self._request("POST", "/master/teardown",
                      urllib.parse.urlencode({"frameworkId": framework_id}).encode(),
                      "application/x-www-form-urlencoded")

    def _request(self, method: str, path: str, body: Optional[bytes] = None,
                 content_type: Optional[str] = None) -> bytes:
        url = self.leader()
        for _ in range(2):
            headers = {"User-Agent": "tfmesos", "Accept": "application/json"}
            if content_type:
                headers["Content-Type"] = content_type
            if self.auth:
                headers["Authorization"] = self.auth
            conn = open_connection(url, self._timeout, self.tls)
            try:
                conn.request(method, urllib.parse.urlsplit(url).path.rstrip("/") + path,
                             body=body, headers=headers)
                response = conn.getresponse()
                payload = response.read(MAX_STATE + 1)
            except OSError as exc:
                raise MesosError("cannot reach the Mesos master at %s: %s"
                                 % (url, describe(exc))) from None
            finally:
                conn.close()
            location = response.getheader("Location")
            if response.status == 307 and location:
                url = self._leader = redirect_base(url, location)
                continue
            break
        if response.status == 401 and self.auth:
            raise MesosError("the Mesos master at %s refused the credentials of principal %r "
                             "for %s: check MESOS_PRINCIPAL and MESOS_SECRET"
                             % (url, basic_principal(self.auth), path))
        if response.status == 401:
            raise MesosError("the Mesos master at %s wants credentials for %s: set "
                             "MESOS_PRINCIPAL and MESOS_SECRET" % (url, path))
        if response.status != 200:
            raise MesosError(("the Mesos master at %s answered %s with HTTP %d %s"
                          % (url, path, response.status, quoted(payload))).rstrip())
        if len(payload) > MAX_STATE:
            raise MesosError("the Mesos master at %s sent more than %d MB for %s"
                             % (url, MAX_STATE >> 20, path))
        return payload
