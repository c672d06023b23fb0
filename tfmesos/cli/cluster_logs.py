"""``tfmesos logs RUN --master M``: a run's task output read where Mesos
keeps it, in the agents' sandboxes, through their ``/files/read`` (what the
Mesos web UI shows), from any machine that reaches the master; with
``--follow`` until the run's tasks have ended.

The agent of a task is the one its ``slave_id`` names in ``/master/state``;
its endpoints are at the address of its libprocess ``pid``
(``slave(1)@ip:port``), as the web UI reaches them.
"""

import time
import urllib.parse

from ..exceptions import TFMesosError
from ..mesos.agent_files import MAX_REPLY, AgentFiles, AgentFilesError, sandbox_path
from .cluster_runs import cluster_runs, find_cluster_run

PAGE = MAX_REPLY // 8     # bytes asked for per read: JSON writes a byte as at most 6 characters
TIMEOUT = 10.0            # seconds for one agent's answer


def slot_name(task):
    """``worker:0`` of a task named ``<run name> worker:0``."""
    return (task.get("name") or "").rsplit(" ", 1)[-1]


def run_tasks(state, framework_id):
    """{slot name: the task (state JSON) of its latest attempt} of a run."""
    latest = {}
    for framework in (state.get("frameworks") or []) + (state.get("completed_frameworks") or []):
        if framework.get("id") != framework_id:
            continue
        for task in (framework.get("completed_tasks") or []) + (framework.get("tasks") or []):
            latest[slot_name(task)] = task      # later entries are later attempts
    return latest


def agent_base_urls(state, scheme):
    """{agent id: ``scheme://ip:port``} from the agents' pids."""
    urls = {}
    for agent in state.get("slaves") or []:
        address = (agent.get("pid") or "").rpartition("@")[2]
        if address:
            urls[agent.get("id")] = "%s://%s" % (scheme, address)
    return urls


class SandboxFile:
    """One task's stdout or stderr on its agent, read on from where it was left."""

    def __init__(self, name, base_url, path, prefix, auth):
        self.name, self.base_url, self.path, self.prefix = name, base_url, path, prefix
        self.auth = auth
        self.offset = 0
        self.partial = ""

    def read(self, out, final=False):
        agent = AgentFiles(self.base_url, TIMEOUT, self.auth, None)
        try:
            while True:
                answer = agent.get("/files/read", path=self.path, offset=self.offset,
                                   length=PAGE)
                data = answer.get("data") if isinstance(answer, dict) else None
                if not isinstance(data, str):
                    raise AgentFilesError("%s/files/read answered no data" % self.base_url)
                if not data:
                    break
                self.offset += len(data.encode("utf-8", "surrogateescape"))
                self._write(data, out)
        except AgentFilesError as exc:
            if "404" not in str(exc):      # not there (yet): nothing to show
                raise TFMesosError("cannot read %s's output: %s" % (self.name, exc)) from None
        finally:
            agent.close()
        if final and self.partial:
            self._write("\n", out)

    def _write(self, data, out):
        lines = (self.partial + data).split("\n")
        self.partial = lines.pop()
        for line in lines:
            out.write(("[%s] " % self.name if self.prefix else "") + line + "\n")
        out.flush()


def print_logs(reader, wanted, tasks, stream, follow, out, auth=None, interval=1.0):
    """Print the ``stream`` of ``tasks`` (all: empty) of the run ``wanted``."""
    state = reader.state()
    run = find_cluster_run(cluster_runs(state), wanted, live_only=False)
    scheme = urllib.parse.urlsplit(reader.leader()).scheme or "http"
    files = {}
    while True:
        found = run_tasks(state, run.framework_id)
        unknown = [name for name in tasks if name not in found]
        if unknown and (not follow or run.state == "finished"):
            raise TFMesosError("run %s has no task %s; its tasks: %s" % (
                run.run_id, ", ".join(unknown), ", ".join(sorted(found)) or "none yet"))
        agents = agent_base_urls(state, scheme)
        chosen = tasks or sorted(found)
        for name in chosen:
            task = found.get(name)
            if task is None or task.get("slave_id") not in agents:
                continue
            path = "%s/%s" % (sandbox_path(run.framework_id,
                                           task.get("executor_id") or task["id"]), stream)
            current = files.get(name)
            if current is None or current.path != path:
                if current is not None:
                    current.read(out, final=True)
                files[name] = current = SandboxFile(name, agents[task["slave_id"]], path,
                                                    len(chosen) > 1, auth)
            current.read(out)
        if not follow or run.state == "finished":
            for current in files.values():
                current.read(out, final=True)
            return 0
        time.sleep(interval)
        state = reader.state()
        run = find_cluster_run(cluster_runs(state), run.run_id, live_only=False)
