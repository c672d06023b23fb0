"""The master's random ids (``mesos_local/ids.py``): version-4 UUIDs as
``uuid.uuid4()`` makes them, without importing ``uuid`` (and ``platform``)."""

import os
import subprocess
import sys
import uuid

from mesos_local.ids import uuid4_bytes, uuid4_text


def test_ids_are_version_4_uuids_and_differ():
    texts = {uuid4_text() for _ in range(1000)}
    assert len(texts) == 1000
    for text in list(texts)[:100]:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122
    raw = uuid4_bytes()
    assert len(raw) == 16 and uuid.UUID(bytes=raw).version == 4


def test_starting_a_master_imports_no_uuid():
    probe = ("import sys; from mesos_local import AgentSpec, LocalMaster; "
             "m = LocalMaster(agents=[AgentSpec(cpus=1, mem=256)]); m.start(); m.stop(); "
             "print(sorted(n for n in ('uuid', 'platform') if n in sys.modules))")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True,
                         timeout=120, cwd=repo).stdout
    assert out.strip() == "[]", out
