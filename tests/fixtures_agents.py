"""What the tests of agents' ``/files`` share: a task run to its end on an
embedded master, and an agent that accepts connections and never answers.
Import the fixture into a test module::

    from fixtures_agents import silent_agent  # noqa: F401
"""

import socket
import threading

import pytest
from mesos_http_client import task_info

from tfmesos.mesos.agent_files import agent_base_url, sandbox_path


def finished_task(client, task_id, command):
    """(the agent's base URL, the sandbox path) of a task run to its end."""
    offer = client.next_offers()[0]
    client.launch(offer, [task_info(task_id, offer, command)], filters={"refuse_seconds": 0})
    client.wait_state(task_id, "TASK_FINISHED", timeout=30)
    return agent_base_url(offer["url"]), sandbox_path(client.framework_id, task_id)


@pytest.fixture
def silent_agent():
    """A listening socket that accepts and never answers; yields its base URL."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.1)
    accepted = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:%d" % server.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        for conn in accepted:
            conn.close()
        server.close()
