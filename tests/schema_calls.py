"""Mesos Calls for the embedded master's schema and parsing tests: a
SUBSCRIBE, an ACCEPT, and a TaskInfo that uses every field tfmesos knows."""

import base64

UUID = base64.b64encode(b"0123456789abcdef").decode()


def subscribe_call(**info):
    framework_info = {"user": "me", "name": "fw"}
    framework_info.update(info)
    return {"type": "SUBSCRIBE", "subscribe": {"framework_info": framework_info}}


def full_task():
    return {
        "name": "worker:0", "task_id": {"value": "worker-0"}, "agent_id": {"value": "S0"},
        "resources": [
            {"name": "cpus", "type": "SCALAR", "scalar": {"value": 1.5},
             "allocation_info": {"role": "*"}, "role": "*"},
            {"name": "mem", "type": "SCALAR", "scalar": {"value": 1024}},
            {"name": "ports", "type": "RANGES",
             "ranges": {"range": [{"begin": 31000, "end": "31001"}]}},
            {"name": "gpus", "type": "SCALAR", "scalar": {"value": 1}}],
        "command": {"value": "python -m tfmesos.task", "shell": True,
                    "environment": {"variables": [
                        {"name": "A", "value": "1"},
                        {"name": "S", "type": "SECRET", "secret": {
                            "type": "VALUE", "value": {"data": UUID}}}]},
                    "uris": [{"value": "http://example.com/x.tgz", "extract": True}],
                    "user": "nobody"},
        "container": {"type": "MESOS", "mesos": {"image": {
            "type": "DOCKER", "docker": {"name": "tensorflow/tensorflow:latest"},
            "cached": False}},
            "volumes": [{"container_path": "/data", "host_path": "/srv/data", "mode": "RO"}]},
        "kill_policy": {"grace_period": {"nanoseconds": "2500000000"}},
        "labels": {"labels": [{"key": "job", "value": "worker"}]},
        "discovery": {"visibility": "FRAMEWORK", "ports": {"ports": [{"number": 31000}]}},
        "data": base64.b64encode(b"payload").decode(),
        "max_completion_time": {"nanoseconds": 60 * 10 ** 9},
        "limits": {"cpus": {"value": 2}},
    }


def accept_call(*tasks):
    return {"type": "ACCEPT", "framework_id": {"value": "F"}, "accept": {
        "offer_ids": [{"value": "O1"}],
        "operations": [{"type": "LAUNCH", "launch": {"task_infos": list(tasks)}}],
        "filters": {"refuse_seconds": 1}}}
