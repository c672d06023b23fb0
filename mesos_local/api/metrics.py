"""``/metrics/snapshot``: the master metrics dashboards read, under Mesos'
names (src/master/metrics.cpp, Mesos 1.11), all numbers:

* ``master/uptime_secs``, ``master/elected``,
  ``master/operator_event_stream_subscribers``;
* agents: ``master/slaves_{connected,disconnected,active,inactive,unreachable}``;
* frameworks: ``master/frameworks_{connected,disconnected,active,inactive}``,
  ``master/outstanding_offers``;
* tasks: gauges of the live states (``master/tasks_staging``, ``_starting``,
  ``_running``, ``_killing``, ``_unreachable``) and counters of the ended
  ones since the master started (``master/tasks_finished``, ``_failed``,
  ``_killed``, ``_lost``, ``_error``, ``_dropped``, ``_gone``,
  ``_gone_by_operator``);
* resources: ``master/{cpus,gpus,mem,disk}_{total,used,percent}`` (used: held
  by tasks, as ``Master::_resources_used``; percent a fraction) and their
  ``_revocable_`` forms (always 0 here).

``snapshot`` runs with the master's lock held.
"""

import time

from ..records import TERMINAL_STATES
from ..resources import Resources
from .messages import ENUMS

LIVE_STATES = tuple(s for s in ENUMS["TaskState"]
                    if s not in TERMINAL_STATES and s != "TASK_UNKNOWN")
ENDED_STATES = tuple(s for s in ENUMS["TaskState"] if s in TERMINAL_STATES)
RESOURCES = ("cpus", "gpus", "mem", "disk")


def _name(state):
    return "master/tasks_" + state[len("TASK_"):].lower()


def snapshot(master, records):
    agents = list(records.agents.values())
    frameworks = list(records.frameworks.values())
    active_agents = sum(1 for agent in agents if agent.active)
    connected = sum(1 for f in frameworks if f.connected)
    active = sum(1 for f in frameworks if f.active)
    out = {
        "master/uptime_secs": max(0.0, time.time() - (master.start_time or time.time())),
        "master/elected": 1.0 if master.leader() is None else 0.0,
        "master/slaves_connected": float(active_agents),
        "master/slaves_disconnected": 0.0,
        "master/slaves_active": float(active_agents),
        "master/slaves_inactive": float(len(agents) - active_agents),
        "master/slaves_unreachable": 0.0,
        "master/frameworks_connected": float(connected),
        "master/frameworks_disconnected": float(len(frameworks) - connected),
        "master/frameworks_active": float(active),
        "master/frameworks_inactive": float(len(frameworks) - active),
        "master/outstanding_offers": float(len(records.offers)),
        "master/operator_event_stream_subscribers": float(len(records.subscribers)),
    }
    live = dict.fromkeys(LIVE_STATES, 0)
    for framework in frameworks:
        for task in framework.tasks.values():
            if task.state in live:
                live[task.state] += 1
    for state, count in live.items():
        out[_name(state)] = float(count)
    for state in ENDED_STATES:
        out[_name(state)] = float(records.ended_tasks.get(state, 0))
    total, used = Resources(), Resources()
    for agent in agents:
        total.add(agent.total)
        used.add(agent.used)
    totals, useds = total.to_state(), used.to_state()
    for name in RESOURCES:
        amount, taken = float(totals.get(name, 0)), float(useds.get(name, 0))
        out["master/%s_total" % name] = amount
        out["master/%s_used" % name] = taken
        out["master/%s_percent" % name] = taken / amount if amount else 0.0
        for kind in ("total", "used", "percent"):
            out["master/%s_revocable_%s" % (name, kind)] = 0.0
    return out


__all__ = ["snapshot"]
