"""Framework authentication of the local master, as Mesos does it for the
HTTP scheduler API with ``--authenticate_http_frameworks`` and
``--credentials``: HTTP basic authentication against a table of
principals and secrets.

* ``Authenticator``: checks an ``Authorization`` header; a request without
  valid credentials gets ``401`` with ``WWW-Authenticate: Basic
  realm="mesos-master-scheduler"`` (libprocess' ``BasicAuthenticator``,
  3rdparty/libprocess/src/authenticator.cpp; the realm is
  ``DEFAULT_HTTP_FRAMEWORK_AUTHENTICATION_REALM``, src/master/constants.hpp).
* ``credentials_table``: ``LocalMaster(credentials=...)`` (a mapping or
  pairs) checked into a dict.
* ``read_credentials``: Mesos' credentials file, JSON
  ``{"credentials": [{"principal": ..., "secret": ...}]}``, or the plain
  text ``principal secret`` per line of Mesos before 1.11
  (src/credentials/credentials.hpp).
* ``generate_credentials``: a one-time random pair for an embedded master.
"""

import base64
import binascii
import hmac
import json
import logging
import os
import secrets
import stat

from ..errors import CredentialsError

log = logging.getLogger(__name__)

REALM = "mesos-master-scheduler"
CHALLENGE = 'Basic realm="%s"' % REALM
# The operator's endpoints (/api/v1, /master/teardown): Mesos routes them in
# READWRITE_HTTP_AUTHENTICATION_REALM (src/master/constants.hpp).
OPERATOR_REALM = "mesos-master-readwrite"
OPERATOR_CHALLENGE = 'Basic realm="%s"' % OPERATOR_REALM
# /files: READONLY_HTTP_AUTHENTICATION_REALM (src/master/main.cpp:487).
READONLY_REALM = "mesos-master-readonly"
READONLY_CHALLENGE = 'Basic realm="%s"' % READONLY_REALM
# The body of every 401, the master's and the agents' alike: libprocess'
# Unauthorized (3rdparty/libprocess/include/process/http.hpp:730-731), which
# no authenticator of Mesos words otherwise; a client may rely on no more.
UNAUTHORIZED_BODY = "401 Unauthorized."


def _check_pair(principal, secret, where):
    if not isinstance(principal, str) or not principal:
        raise CredentialsError("%s: the principal must be a non-empty string, got %r"
                               % (where, principal))
    if ":" in principal or any(c.isspace() or ord(c) < 32 for c in principal):
        raise CredentialsError("%s: principal %r contains ':', white space or control "
                               "characters, which HTTP basic authentication cannot carry"
                               % (where, principal))
    if not isinstance(secret, str):
        raise CredentialsError("%s: the secret of %r must be a string" % (where, principal))


def credentials_table(credentials, where="LocalMaster(credentials=...)"):
    """``{principal: secret}`` from a mapping or (principal, secret) pairs;
    None or empty: no authentication (None)."""
    if not credentials:
        return None
    pairs = credentials.items() if isinstance(credentials, dict) else credentials
    table = {}
    for pair in pairs:
        try:
            if isinstance(pair, (str, bytes)):
                raise TypeError(pair)
            principal, secret = pair
        except (TypeError, ValueError):
            raise CredentialsError("%s: expected {principal: secret} or (principal, secret) "
                                   "pairs, got %r" % (where, pair)) from None
        _check_pair(principal, secret, where)
        if principal in table:
            raise CredentialsError("%s: principal %r is given twice" % (where, principal))
        table[principal] = secret
    return table


def parse_credentials(text, source="the credentials file"):
    """``{principal: secret}`` from a credentials file's text: Mesos' JSON
    ``Credentials`` or, when that is not JSON, one ``principal secret`` per
    line (Mesos' deprecated text format). CredentialsError if unusable."""
    if not text.strip():
        raise CredentialsError("%s holds no credentials: add "
                               '{"credentials": [{"principal": ..., "secret": ...}]}' % source)
    try:
        document = json.loads(text)
    except ValueError:
        return _parse_text(text, source)
    if not isinstance(document, dict) or set(document) != {"credentials"} \
            or not isinstance(document["credentials"], list):
        raise CredentialsError('%s: expected {"credentials": [{"principal": ..., '
                               '"secret": ...}, ...]}' % source)
    pairs = []
    for index, item in enumerate(document["credentials"]):
        where = "%s: credentials[%d]" % (source, index)
        if not isinstance(item, dict) or "principal" not in item \
                or not set(item) <= {"principal", "secret"}:
            raise CredentialsError("%s: expected {\"principal\": ..., \"secret\": ...}, got %s"
                                   % (where, json.dumps(item)))
        _check_pair(item["principal"], item.get("secret", ""), where)
        pairs.append((item["principal"], item.get("secret", "")))
    if not pairs:
        raise CredentialsError("%s holds no credentials: the list is empty" % source)
    return credentials_table(pairs, source)


def _parse_text(text, source):
    """Mesos' text format: ``principal secret`` per line."""
    pairs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 2:
            raise CredentialsError("%s line %d: expected 'principal secret' (or JSON "
                                   '{"credentials": [...]})' % (source, number))
        pairs.append(tuple(fields))
    return credentials_table(pairs, source)


def read_credentials(path):
    """The credentials of the file ``path`` (``/path`` or ``file:///path``)."""
    if path.startswith("file://"):
        path = path[len("file://"):]
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        mode = os.stat(path).st_mode
    except (OSError, UnicodeDecodeError) as exc:
        raise CredentialsError("cannot read the credentials file %s: %s"
                               % (path, getattr(exc, "strerror", None) or exc)) from exc
    if mode & stat.S_IRWXO:
        # As Mesos warns (src/credentials/credentials.hpp).
        log.warning("permissions on the credentials file %s are too open: it should not be "
                    "accessible by others (chmod o-rwx)", path)
    return parse_credentials(text, path)


def generate_credentials():
    """A one-time random (principal, secret) for an embedded master."""
    return "mesos-local-%s" % secrets.token_hex(4), secrets.token_urlsafe(32)


class Authenticator:
    """HTTP basic authentication against ``{principal: secret}``."""

    def __init__(self, table):
        self._table = dict(table)

    def principal(self, header):
        """The authenticated principal of an ``Authorization`` header, or None."""
        if not header:
            return None
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return None
        # RFC 7617: the user-id has no ':', the password may (Mesos splits on
        # every ':', so there a secret with ':' never authenticates).
        principal, found, secret = decoded.partition(":")
        expected = self._table.get(principal)
        if not found or expected is None:
            return None
        if not hmac.compare_digest(secret.encode("utf-8"), expected.encode("utf-8")):
            return None
        return principal


__all__ = ["REALM", "CHALLENGE", "UNAUTHORIZED_BODY", "OPERATOR_REALM", "OPERATOR_CHALLENGE",
           "READONLY_REALM", "READONLY_CHALLENGE", "CredentialsError",
           "credentials_table", "parse_credentials", "read_credentials",
           "generate_credentials", "Authenticator"]
