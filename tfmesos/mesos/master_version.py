"""The master's version, from its ``GET /version`` endpoint."""

import json
import re
import urllib.request


def master_version(master_url, timeout=5.0):
    """``(major, minor)`` of the Mesos master at ``master_url``; ``(1, 0)``
    when it cannot tell (no such endpoint: assume a current Mesos)."""
    try:
        with urllib.request.urlopen(master_url.rstrip("/") + "/version",
                                    timeout=timeout) as response:
            version = json.load(response).get("version", "0")
        return tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    except (OSError, ValueError, AttributeError):
        return (1, 0)
