"""Whether an image name is a Docker reference (``image_name_error``): the
grammar of distribution's reference package (reference/regexp.go), which
the engine applies (``invalid reference format``) and Mesos' Docker image
provisioner too. A name the engine cannot parse was reported at launch,
three attempts later, as "Docker is unavailable"."""

import re
from typing import Optional

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|-+)"
_PATH = r"%s(?:%s%s)*" % (_ALNUM, _SEPARATOR, _ALNUM)
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = r"(?:%s(?:\.%s)*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?" % (_DOMAIN_PART, _DOMAIN_PART)
_TAG = r"[\w][\w.-]{0,127}"
# The digests the engine checks (go-digest: lowercase hex of the algorithm's size).
_DIGEST = r"(?:sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128})"
_REFERENCE = re.compile(r"(?:%s/)?%s(?:/%s)*(?::%s)?(?:@%s)?\Z"
                        % (_DOMAIN, _PATH, _PATH, _TAG, _DIGEST), re.ASCII)
_NAME_ONLY = re.compile(r"%s(?:/%s)*(?::%s)?(?:@%s)?\Z" % (_PATH, _PATH, _TAG, _DIGEST), re.ASCII)
MAX_NAME = 255   # the repository name's length (reference.NameTotalLengthMax)


def image_name_error(name: str) -> Optional[str]:
    """Why ``name`` is no Docker image reference, or None when it is one."""
    # The first component is a registry host only when it reads as one
    # (a '.' or ':', or localhost: distribution's splitDockerDomain); else
    # it is part of the name, lowercase ('Foo/bar' is no host 'Foo').
    first, slash, _ = name.partition("/")
    is_host = slash and ("." in first or ":" in first or first == "localhost")
    if not (_REFERENCE if is_host else _NAME_ONLY).match(name):
        return ("%r is not a Docker image name: [HOST[:PORT]/]NAME[:TAG][@DIGEST], NAME of "
                "lowercase letters, digits and . _ - separators, e.g. tfmesos/tfmesos:0.1"
                % (name,))
    repository = name.partition("@")[0]
    if ":" in repository.rpartition("/")[2]:
        repository = repository.rpartition(":")[0]
    if len(repository) > MAX_NAME:
        return "image name %r is longer than %d characters" % (name[:40] + "...", MAX_NAME)
    return None


__all__ = ["image_name_error"]
