"""What each task really used (``tfmesos/task/usage.py``), where it goes
(the exit frame, run.json, tfrun's end-of-run table and hints), a task
killed for its memory named by tfrun (and restarted with --max-restarts),
cgroups gone after a run, and TensorFlow's thread variables sized to the
task's cpus."""

import glob
import json
import os
import re
import sys
import textwrap

import pytest
from cgroup_names import cgroup_master_pid
from offers import offer
from taskinfo_helpers import launch_all, variables
from tfrun_helpers import run_tfrun
from waiting import wait_until

from mesos_local.containerizer.cgroups import isolation_problem
from tfmesos.core.spec import RunSpec
from tfmesos.core.task_ends import memory_kill_message, memory_kill_peak
from tfmesos.core.taskinfo import thread_env
from tfmesos.record.hints import resource_flag
from tfmesos.record.schema import Attempt, CgroupUsage, Job, RunFile, Task, Usage
from tfmesos.record.usage_table import (
    MAX_ROWS,
    OVER,
    clean_usage,
    hints,
    table_lines,
    usage_lines,
    usage_rows,
)
from tfmesos.task import usage as task_usage

pytestmark = pytest.mark.timeout(300)

PROBLEM = isolation_problem()
needs_cgroups = pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")
TINY = ["-Cw", "0.2", "-Mw", "64", "-Cs", "0.2", "-Ms", "64"]
# Allocates (and touches) 4 MB blocks until far past a 64 MB limit.
HOG = ("%s -c 'import time\nblocks = []\nfor _ in range(100):\n"
       "    blocks.append(bytearray(4 << 20))\n    time.sleep(0.01)\nprint(\"survived\")'"
       % sys.executable)


# -- measuring, on the task side -----------------------------------------------------

def test_monitor_measures_a_process_tree(tmp_path):
    """A parent and a child: the tree's peak, the largest process, cpu,
    wall time, and samples bounded by thinning."""
    script = tmp_path / "tree.py"
    script.write_text(textwrap.dedent("""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c",
            "b = bytearray(40 << 20); import time; time.sleep(1.5)"])
        data = bytearray(60 << 20)
        end = time.monotonic() + 1.5
        # Busy for 1.5 s and at least 0.8 s of its own user cpu (a loaded
        # machine gives it less of the wall time, and more system time: the
        # pages above; process_time() counted both, user 0.46 s once).
        while time.monotonic() < end or os.times().user < 0.8:
            pass
        child.wait()
    """))
    import subprocess
    proc = subprocess.Popen([sys.executable, str(script)], start_new_session=True)
    monitor = task_usage.UsageMonitor(proc.pid, sample_interval=0.2, peak_interval=0.1,
                                      max_samples=4).start()
    proc.wait()
    report = monitor.stop()
    assert report["wall_s"] >= 1.4
    assert report["cpu_s"] >= 0.5 and report["user_s"] >= 0.5
    assert report["peak_rss_mb"] >= 60                 # the largest process
    assert report["peak_tree_rss_mb"] >= 95            # both at once (sampled)
    assert report["peak_gpu_mb"] is None and "cgroup" not in report
    assert 2 <= len(report["samples"]) <= 4            # thinned, not cut
    assert report["sample_interval_s"] > 0.2
    assert all(set(s) == {"t", "cpu_s", "rss_mb"} for s in report["samples"])
    times = [s["t"] for s in report["samples"]]
    assert times == sorted(times)
    assert [s["cpu_s"] for s in report["samples"]] == sorted(s["cpu_s"]
                                                          for s in report["samples"])


@pytest.fixture
def fake_nvidia_smi(tmp_path, monkeypatch):
    """``nvidia-smi`` on PATH that lists GPUs and one compute app per pid in
    $FAKE_GPU_PIDS, 1500 MB each."""
    script = tmp_path / "nvidia-smi"
    script.write_text(textwrap.dedent("""\
        #!/bin/sh
        case "$*" in
          -L) echo 'GPU 0: NVIDIA H100 (UUID: GPU-0)';;
          *query-compute-apps*) for p in $FAKE_GPU_PIDS; do echo "$p, 1500"; done;;
          *query-gpu*) echo '0, 2048';;
        esac
    """))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path, os.environ["PATH"]))
    return monkeypatch


def test_gpu_memory_of_the_tree_from_nvidia_smi(fake_nvidia_smi):
    fake_nvidia_smi.setenv("FAKE_GPU_PIDS", "111 222 333")
    assert task_usage.gpu_memory_mb({111, 333, 9}) == 3000.0
    # None of ours listed (a container's pid namespace): the task's own GPUs.
    assert task_usage.gpu_memory_mb({9}, visible="0") == 2048.0
    assert task_usage.gpu_memory_mb({9}) == 0.0
    monitor = task_usage.UsageMonitor(os.getpid(), gpus=True, peak_interval=0.05)
    fake_nvidia_smi.setenv("FAKE_GPU_PIDS", str(os.getpid()))
    monitor.observe()
    assert monitor.stop()["peak_gpu_mb"] == 1500.0


def test_usage_is_cleaned_on_the_scheduler_side():
    usage = clean_usage({"wall_s": 3, "cpu_s": "lots", "peak_rss_mb": float("nan"),
                         "samples": [{"t": 1, "cpu_s": 0.5, "evil": "x"}, "junk", {"t": None},
                                     {"cpu_s": 2}],
                         "cgroup": {"oom_kills": 1, "limit_mb": True}, "extra": [1] * 10})
    assert usage["wall_s"] == 3 and usage["cpu_s"] is None and usage["peak_rss_mb"] is None
    assert usage["samples"] == [{"t": 1, "cpu_s": 0.5, "rss_mb": None, "gpu_mb": None}]
    assert usage["cgroup"] == {"limit_mb": None, "peak_mb": None, "oom_kills": 1}
    assert "extra" not in usage
    # What run.json keeps: the dict form of its Usage.
    assert Usage.from_dict(usage).to_dict() == usage
    assert clean_usage("nope") is None


def test_the_exit_frame_carries_the_usage_to_the_run():
    from rendezvous_client import SECRET, Client, make_rendezvous, next_event

    from tfmesos.core.events import TaskExited
    rdv = make_rendezvous()
    try:
        for task_id, usage, expected in (("a", {"cpu_s": 1.5}, {"cpu_s": 1.5}),
                                         ("b", "not an object", None)):
            rdv.expect(task_id)
            client = Client(rdv.port, SECRET)
            client.register(task_id, port=2222)
            client.registered()
            client.send({"type": "exit", "code": 0, "usage": usage})
            assert next_event(rdv, TaskExited) == TaskExited(task_id, 0, expected)
            client.close()
    finally:
        rdv.close()


# -- naming a memory kill ----------------------------------------------------------

def test_memory_kills_are_named_with_the_option_to_raise():
    mesos = "Memory limit exceeded: Requested: 1GB Maximum Used: 1310MB"
    assert memory_kill_peak("REASON_CONTAINER_LIMITATION_MEMORY", mesos) == 1310.0
    assert memory_kill_peak("REASON_CONTAINER_LIMITATION_MEMORY", "") == 0.0
    assert memory_kill_peak(None, "", {"cgroup": {"oom_kills": 1, "peak_mb": 1024},
                                       "peak_tree_rss_mb": 990}) == 1024
    assert memory_kill_peak(None, "", {"cgroup": {"oom_kills": 0}}) is None
    assert memory_kill_peak("REASON_COMMAND_EXECUTOR_FAILED", mesos) is None
    assert memory_kill_message("worker:1", "worker", 1024, 1310) == \
        "worker:1 was killed for using more than its 1024 MB (peak 1310 MB): raise -Mw"
    assert memory_kill_message("ps:0", "ps", 512, 0, mode="fine") == \
        "ps:0 was killed for using more than its 512 MB: raise the ps job's mem"
    assert (resource_flag("chief"), resource_flag("evaluator", "cpus")) == ("-Mc", "-Cw")
    assert resource_flag("tensorboard") == "--job tensorboard:COUNT:CPUS:MEM"


@pytest.mark.parametrize("how", ["mesos", "task"])
def test_the_policy_names_a_memory_kill_and_counts_it_as_a_loss(how):
    """Whichever tells first: Mesos' TASK_FAILED with the memory reason, or
    the task's exit message (the OOM killer in its own cgroup)."""
    from policy_helpers import FakeRun

    from tfmesos.core.events import TaskExited
    from tfmesos.core.jobs import Job
    from tfmesos.core.restarts import RestartPolicy
    from tfmesos.exceptions import TaskFailed

    def kill(run):
        if how == "mesos":
            run.status("worker:1", "TASK_FAILED", "Memory limit exceeded: Requested: 1GB "
                       "Maximum Used: 1310MB", "REASON_CONTAINER_LIMITATION_MEMORY")
        else:
            run.handle(TaskExited(run.slots.named("worker:1").task_id, 137, {
                "peak_tree_rss_mb": 1001.0, "samples": [],
                "cgroup": {"limit_mb": 1024, "peak_mb": 1310.0, "oom_kills": 1}}))

    expected = "worker:1 was killed for using more than its 1024 MB (peak 1310 MB): raise -Mw"
    run = FakeRun([Job("worker", num=2, mem=1024)])
    run.running()
    with pytest.raises(TaskFailed) as err:
        kill(run)
    assert str(err.value) == expected and err.value.task == "worker:1"
    run = FakeRun([Job("worker", num=2, mem=1024)], policy=RestartPolicy(1, "lost", backoff=2))
    run.running()
    kill(run)
    assert run.phase == "restarting"
    assert run.notes[0] == expected + "; restarting the cluster (restart 1 of 1) in 2 s"
    assert run.record.snapshot()["restarts"][0]["cause"] == "lost"


# -- the end-of-run table ----------------------------------------------------------

def record(*tasks):
    """A RunFile: ``(name, job, cpus, mem, usage)`` per task."""
    jobs, entries = {}, []
    for name, job, cpus, mem, usage in tasks:
        jobs[job] = Job(name=job, cpus=cpus, mem=mem)
        entries.append(Task(name=name, job=job, attempts=[
            Attempt(attempt=1), Attempt(attempt=2, usage=usage)]))
    return RunFile(jobs=list(jobs.values()), tasks=entries)


def used(cpu, wall, peak, gpu=None):
    return Usage(cpu_s=cpu, wall_s=wall, peak_tree_rss_mb=peak, peak_rss_mb=peak,
                 peak_gpu_mb=gpu)


def usage_section(data):
    """The report's CPU and memory section of ``data`` (a sample given to
    each measured attempt: without one the report has no such section)."""
    from tfmesos.record.history import Run
    from tfmesos.record.report import render
    from tfmesos.record.schema import Sample
    data.timings.submitted = "2026-11-26T10:00:00.000Z"
    data.timings.finished = "2026-11-26T10:01:00.000Z"
    for task in data.tasks:
        task.attempts[-1].exited = "2026-11-26T10:00:50.000Z"
        task.attempts[-1].usage.samples = [Sample(t=0.5, cpu_s=0.0, rss_mb=10.0)]
    page = render(Run("/nowhere", data))
    return page[page.index("<h2>CPU and memory</h2>"):]


def test_table_and_hints():
    data = record(("worker:0", "worker", 1, 1024, used(55.0, 60.0, 980.0)),
                  ("worker:1", "worker", 1, 1024, used(54.0, 60.0, 700.0)),
                  ("ps:0", "ps", 2, 2048, used(6.0, 60.0, 300.0, gpu=512.0)),
                  ("chief:0", "chief", 1, 1024, None))
    rows = usage_rows(data)
    assert [row[0] for row in rows] == ["worker:0", "worker:1", "ps:0"]  # chief: no usage
    lines = table_lines(rows)
    assert lines[0].split() == ["task", "cpus", "cpu-s", "avg", "cpus", "used", "mem", "MB",
                                "peak", "MB"]
    assert lines[1].split() == ["worker:0", "1", "55.0", "0.92", "1024", "980", "(96%)", "RSS"]
    assert lines[3].split()[:8] == ["ps:0", "2", "6.0", "0.10", "2048", "300", "(15%)", "RSS"]
    assert lines[3].endswith("GPU 512 MB")
    assert hints(rows) == [
        "worker's processes peaked at 980 MB RSS of its 1024 MB (96%; shared libraries included, "
        "which a memory cgroup may not count): a Mesos agent with cgroups isolation may kill it "
        "past its mem; raise -Mw (e.g. -Mw 1280)",
        "ps used at most 300 MB of its 2048 MB (15%): -Ms 384 would do",
        "ps used 0.1 of its 2 cpus on average: -Cs 0.2 would do"]
    lines = usage_lines(data)
    assert lines[0] == "tfrun: resources asked and used (samples in run.json):"
    assert lines[-1].startswith("tfrun: sizing: ps used 0.1")
    assert usage_lines(record(("chief:0", "chief", 1, 1024, None))) == []
    # Short commands say nothing about their cpus, nor that they need less memory;
    # that one came close to its memory's limit is worth saying however short it ran.
    assert hints(usage_rows(record(("w:0", "w", 4, 100, used(0.1, 2.0, 50.0))))) == []
    assert hints(usage_rows(record(("worker:0", "worker", 1, 1024, used(0, 0.1, 13.0))))) == []
    assert hints(usage_rows(record(("worker:0", "worker", 1, 1024, used(0.5, 2, 1000.0))))) == [
        "worker's processes peaked at 1000 MB RSS of its 1024 MB (98%; shared libraries "
        "included, which a memory cgroup may not count): a Mesos agent with cgroups isolation "
        "may kill it past its mem; raise -Mw (e.g. -Mw 1280)"]
    # tfrun -q: the table, no advice.
    long_run = record(("worker:0", "worker", 1, 1024, used(1.0, 60.0, 13.0)))
    assert usage_lines(long_run)[-2].startswith("tfrun: sizing: worker used at most 13 MB")
    assert not [line for line in usage_lines(long_run, advice=False) if "sizing" in line]


def test_sizing_advice_never_names_what_the_task_has_or_more():
    # "worker used 0.01 of its 0.1 cpus on average: -Cw 0.1 would do", and of
    # 0.05 cpus "-Cw 0.1 would do"; of 64 MB, "-Mw 64 would do".
    idle = used(0.1, 30.0, 12.0)
    assert hints(usage_rows(record(("worker:0", "worker", 0.1, 64.0, idle)))) == []
    assert hints(usage_rows(record(("worker:0", "worker", 0.05, 32.0, idle)))) == []
    assert hints(usage_rows(record(("worker:0", "worker", 0.5, 256.0, idle)))) == [
        "worker used at most 12 MB of its 256 MB (5%): -Mw 64 would do",
        "worker used 0 of its 0.5 cpus on average: -Cw 0.1 would do"]
    # No option sizes tfrun --tensorboard's task: "--job tensorboard:COUNT:CPUS:MEM
    # 0.2 would do" named one tfrun refuses (found by a review helper).
    assert hints(usage_rows(record(("tensorboard:0", "tensorboard", 0.5, 1536.0, idle),
                                   ("tensorboard:0", "tensorboard", 0.5, 1536.0,
                                    used(0.5, 30.0, 1500.0))))) == []


def test_an_average_above_the_cpus_is_marked_and_explained():
    """A ps given 1 cpu whose threads used 3 on average (180 cpu-s in 60 s):
    Mesos' cpus are cpu.shares, no cap without --cgroups_enable_cfs; the
    table marks it rather than show 3.00 of 1 as if it could not be."""
    data = record(("ps:0", "ps", 1, 1024, used(180.0, 60.0, 240.0)),
                  ("worker:0", "worker", 2, 1024, used(119.0, 60.0, 500.0)))
    lines = usage_lines(data)
    assert lines[2].split()[:4] == ["ps:0", "1", "180.0", "3.00+"]
    assert lines[3].split()[:4] == ["worker:0", "2", "119.0", "1.98"]     # under: no mark
    [note] = [line for line in lines if "above its cpus" in line]
    assert note.startswith("tfrun: + above its cpus: Mesos' cpus are a share (cpu.shares), "
                           "not a cap, unless the agent runs --cgroups_enable_cfs")
    assert not [line for line in usage_lines(record(
        ("ps:0", "ps", 1, 1024, used(60.0, 60.0, 240.0)))) if "above its cpus" in line]


def test_memory_is_judged_on_the_task_s_own_cgroup_where_it_has_one():
    """tfrun -w 1 -Mw 384 of a TensorFlow one-liner: its processes' RSS
    peaked at 763 MB (TensorFlow's shared libraries, ~500 MB, counted),
    its memory cgroup, limited to 384 MB, at 310 MB, no OOM kill. The table
    said 199% and the hint "kills it past its mem; raise -Mw"."""

    def tensorflow(cgroup):
        return Usage(cpu_s=1.2, wall_s=3.0, peak_tree_rss_mb=763.0, peak_rss_mb=760.0,
                     cgroup=cgroup)

    data = record(("worker:0", "worker", 0.5, 384,
                   tensorflow(CgroupUsage(limit_mb=384.0, peak_mb=309.9, oom_kills=0))))
    lines = usage_lines(data)
    assert lines[1].split()[-2:] == ["peak", "MB"]
    assert lines[2].split()[5:] == ["310", "(81%)"]
    assert not [line for line in lines if "sizing" in line or "RSS" in line], lines
    assert "<td>310 (81%)</td>" in usage_section(data)
    # Its cgroup (with mesos-executor's 32 MB) near its limit: raise it.
    near = record(("worker:0", "worker", 0.5, 384,
                   tensorflow(CgroupUsage(limit_mb=416.0, peak_mb=370.0, oom_kills=0))))
    assert hints(usage_rows(near)) == [
        "worker peaked at 370 MB of its 384 MB (96%): a Mesos agent with cgroups isolation "
        "kills it past its mem; raise -Mw (e.g. -Mw 512)"]
    # Its cgroup at its limit, no OOM kill (the same command on another host):
    # the kernel reclaimed page cache (TensorFlow's libraries) there, no proof
    # of a need; "kills it past its mem" were false.
    full = record(("worker:0", "worker", 0.5, 384,
                   tensorflow(CgroupUsage(limit_mb=384.0, peak_mb=384.0, oom_kills=0))))
    assert usage_lines(full)[2].split()[5:] == ["384", "(100%)"]
    assert hints(usage_rows(full)) == [
        "worker filled its 384 MB memory cgroup (100% of its mem) without an OOM kill: the "
        "cgroup counts page cache, which the kernel reclaims at its limit; raise -Mw only if it "
        "ran slow (e.g. -Mw 512)"]
    # No cgroup of its own (none; one without a limit, or with a container's,
    # whose peak is every process's in it): its processes' RSS, said to be.
    # A container's (an unisolated agent in a 256-MB container: every task's
    # peak there; found by a review helper reading 5f1516e) is not the task's either.
    for cgroup in (None, CgroupUsage(peak_mb=5000.0),
                   CgroupUsage(limit_mb=8192.0, peak_mb=5000.0, oom_kills=0),
                   CgroupUsage(limit_mb=256.0, peak_mb=250.0, oom_kills=0)):
        data = record(("worker:0", "worker", 0.5, 384, tensorflow(cgroup)))
        lines = usage_lines(data)
        assert lines[2].split()[5:] == ["763", "(199%)", "RSS"], lines
        assert lines[3] == ("tfrun: RSS: no memory cgroup of the task's own measured it: its "
                            "processes' resident memory, shared libraries included "
                            "(TensorFlow's take ~500 MB a cgroup may not count)")
        assert hints(usage_rows(data)) == [
            "worker's processes peaked at 763 MB RSS of its 384 MB (199%; shared libraries "
            "included, which a memory cgroup may not count): a Mesos agent with cgroups "
            "isolation may kill it past its mem; raise -Mw (e.g. -Mw 960)"]
        assert "<td>763 (199%) RSS</td>" in usage_section(data)


def test_a_command_too_short_for_an_average_shows_none_and_no_mark():
    """tfrun -- true, three times: 0.00, 0.33 and 1.00+ of 0.5 cpus (0.01
    cpu-s over 0.01 s of wall time, each rounded to 0.01), and a note that
    it used more than its cpus. Under a second: "-", no mark, no note."""
    for cpu, wall in ((0.0, 0.01), (0.01, 0.03), (0.01, 0.01), (0.9, 0.99)):
        data = record(("worker:0", "worker", 0.5, 256, used(cpu, wall, 10.0)))
        lines = usage_lines(data)
        assert lines[2].split()[:5] == ["worker:0", "0.5", "%.1f" % cpu, "-", "256"], lines
        assert not [line for line in lines if "above its cpus" in line], lines
        section = usage_section(data)
        assert "<td>-</td>" in section and "%s</span>" % OVER not in section
    # A second and more: an average, marked when above the cpus.
    lines = usage_lines(record(("worker:0", "worker", 0.5, 256, used(1.5, 1.0, 10.0))))
    assert lines[2].split()[3] == "1.50+"


def test_one_peak_memory_figure_the_tree_s():
    """run.json holds the tree's peak (873.6), its largest process's (860.9)
    and samples every 10 s (868 at most), no cgroup's: the table, the hints
    and the report all give the tree's, 874 MB."""
    from tfmesos.record.history import Run
    from tfmesos.record.report import render
    from tfmesos.record.schema import Sample
    usage = Usage(cpu_s=30.0, wall_s=40.0, peak_tree_rss_mb=873.6, peak_rss_mb=860.9,
                  sample_interval_s=10.0,
                  samples=[Sample(t=t, cpu_s=t * 0.7, rss_mb=mb)
                           for t, mb in ((10.0, 700.0), (20.0, 868.0), (30.0, 810.0))])
    assert usage.peak_mb() == 873.6
    data = record(("worker:0", "worker", 1, 960, usage))
    assert usage_lines(data)[2].split()[-3:] == ["874", "(91%)", "RSS"]
    assert "peaked at 874 MB RSS of its 960 MB" in hints(usage_rows(data))[0]
    # Files without the tree's peak: the largest measurement they have.
    assert Usage(peak_rss_mb=860.9, samples=usage.samples).peak_mb() == 868.0
    assert Usage(peak_rss_mb=860.9).peak_mb() == 860.9 and Usage().peak_mb() is None
    data.tasks[0].attempts[1].exited = "2026-11-26T10:00:40.000Z"
    data.timings.submitted = "2026-11-26T10:00:00.000Z"
    # Finished: the charts' time axis ends there, not at today's date (an
    # unfinished run's runs until now, whose coordinates once held "861").
    data.timings.finished = "2026-11-26T10:00:41.000Z"
    page = render(Run("/nowhere", data))
    assert "peak 874 MB" in page and "868 MB" not in page and "861 MB" not in page


# -- thread pools sized to the task's cpus -----------------------------------------

def test_thread_variables_follow_cpus_and_the_user_wins():
    assert thread_env(0.2) == {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "2",
                               "OMP_NUM_THREADS": "1"}
    assert thread_env(3.6)["TF_NUM_INTRAOP_THREADS"] == "4"
    jobs = [{"name": "ps", "num": 1, "cpus": 0.5, "mem": 256},
            {"name": "worker", "num": 1, "cpus": 4, "mem": 512, "gpus": 1,
             "env": {"OMP_NUM_THREADS": "8"}}]
    _, infos, _ = launch_all(jobs, RunSpec(), [offer("o1", cpus=8, gpus=1)])
    ps, worker = variables(infos["ps:0"]), variables(infos["worker:0"])
    assert (ps["TF_NUM_INTRAOP_THREADS"], ps["OMP_NUM_THREADS"]) == ("1", "1")
    assert (worker["TF_NUM_INTRAOP_THREADS"], worker["OMP_NUM_THREADS"]) == ("4", "8")
    assert (ps["TFMESOS_GPUS"], worker["TFMESOS_GPUS"]) == ("0", "1")
    run = RunSpec(env=("TF_NUM_INTRAOP_THREADS=0", "TF_NUM_INTEROP_THREADS=0"))
    _, infos, _ = launch_all(jobs, run, [offer("o1", cpus=8, gpus=1)])
    assert variables(infos["worker:0"])["TF_NUM_INTRAOP_THREADS"] == "0"
    assert variables(infos["ps:0"])["TF_NUM_INTEROP_THREADS"] == "0"


def test_tasks_see_the_thread_variables():
    show = 'echo "threads $TF_NUM_INTRAOP_THREADS $TF_NUM_INTEROP_THREADS $OMP_NUM_THREADS"'
    result = run_tfrun("-w", "1", "-s", "0", "-Cw", "2", "-Mw", "64", "--", show)
    assert "[worker:0] threads 2 2 2" in result.stdout, result.stderr
    result = run_tfrun("-w", "1", "-s", "0", "-Cw", "2", "-Mw", "64",
                       "-E", "TF_NUM_INTRAOP_THREADS=5", "--", show)
    assert "[worker:0] threads 5 2 2" in result.stdout, result.stderr


def test_a_cgroup_peak_of_page_cache_is_not_said_to_be_killed_past_its_mem():
    # A task that wrote 1 GB of output: its cgroup peaked at 976 of its 1024
    # MB (its sandbox files' page cache) while its processes held 15 MB; the
    # hint said "a Mesos agent with cgroups isolation kills it past its mem".
    def wrote(oom_kills, tree_rss=15.1):
        return record(("worker:0", "worker", 1.0, 1024, Usage(
            cpu_s=80.0, wall_s=100.0, peak_tree_rss_mb=tree_rss, peak_rss_mb=9.6,
            cgroup=CgroupUsage(limit_mb=1024.0, peak_mb=975.6, oom_kills=oom_kills))))
    assert hints(usage_rows(wrote(0))) == [
        "worker's memory cgroup peaked at 976 MB of its 1024 MB (95%) while its processes "
        "held at most 15 MB: the rest is page cache (output written, files read), which the "
        "kernel reclaims before an OOM kill; raise -Mw only if it ran slow (e.g. -Mw 1280)"]
    killed = "worker peaked at 976 MB of its 1024 MB (95%): a Mesos agent with cgroups " \
             "isolation kills it past its mem; raise -Mw (e.g. -Mw 1280)"
    assert hints(usage_rows(wrote(1))) == [killed]                  # an OOM kill: a need
    assert hints(usage_rows(wrote(0, tree_rss=700.0))) == [killed]  # its processes held it


# -- end to end, on the embedded master ----------------------------------------------

def run_json(run_dir):
    with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as handle:
        return json.load(handle)


@needs_cgroups
def test_task_over_its_memory_is_named_and_its_cgroups_are_gone(tmp_path):
    run_dir = str(tmp_path / "run")
    result = run_tfrun("-w", "1", "-s", "0", *TINY, "--run-dir", run_dir, "--", HOG)
    assert result.returncode != 0
    lines = result.stderr.splitlines()
    line = next(line for line in lines if "was killed for using more" in line)
    assert line.startswith("tfrun: worker:0 was killed for using more than its 64 MB (peak ")
    assert line.endswith(" MB): raise -Mw")
    assert "survived" not in result.stdout
    data = run_json(run_dir)
    assert data["outcome"]["message"] == line[len("tfrun: "):]
    attempt = data["tasks"][0]["attempts"][-1]
    # Whichever told first (the task: the OOM killer in its cgroup, or Mesos),
    # tfrun waits for Mesos' word before it tears the framework down.
    last = attempt["states"][-1]
    assert (last["state"], last["source"], last["reason"]) == (
        "TASK_FAILED", "SOURCE_AGENT", "REASON_CONTAINER_LIMITATION_MEMORY"), attempt["states"]
    assert last["message"].startswith("Memory limit exceeded: Requested: 64MB")
    assert any(line.startswith("tfrun: resources asked and used") for line in lines) or \
        attempt["usage"] is None
    # Gone within seconds: a cleaner of their own removes them after tfrun exits.
    wait_until(lambda: not [path for path in glob.glob("/sys/fs/cgroup/*/mesos_local/*/*")
                            if data["run_id"] in path], 20)


@needs_cgroups
def test_task_killed_for_its_memory_is_restarted_as_a_loss(tmp_path):
    run_dir = str(tmp_path / "run")
    cmd = 'if [ "$TFMESOS_RESTART" = 0 ]; then %s; else echo "fine after restart"; fi' % HOG
    result = run_tfrun("-w", "1", "-s", "0", *TINY, "--max-restarts", "1", "--restart-on",
                       "lost", "--restart-backoff", "0.1", "--run-dir", run_dir, "--", cmd)
    assert result.returncode == 0, result.stderr
    assert "[worker:0] fine after restart" in result.stdout
    assert "worker:0 was killed for using more than its 64 MB" in result.stderr
    assert "restarting the cluster (restart 1 of 1)" in result.stderr
    data = run_json(run_dir)
    assert [r["cause"] for r in data["restarts"]] == ["lost"]
    assert data["restarts"][0]["message"].startswith(
        "worker:0 was killed for using more than its 64 MB")


def test_end_of_run_table_and_samples_in_run_json(tmp_path, monkeypatch):
    """Two busy workers: each attempt's usage in run.json (samples every
    sample interval, here shortened), and the table with a hint. The CPU
    each worker's command got on a loaded machine is its own to say: it
    prints its process time (under CI with three busy loops beside it, one
    got 0.15 s of its 3 s)."""
    run_dir = str(tmp_path / "run")
    busy = ("%s -c 'import time\nb = bytearray(30 << 20)\nend = time.monotonic() + 3\n"
            "while time.monotonic() < end: pass\nprint(\"cpu\", time.process_time())'"
            % sys.executable)
    result = run_tfrun("-w", "2", "-s", "0", "-Cw", "1", "-Mw", "1024", "--run-dir", run_dir,
                       "--", busy, env={"TFMESOS_USAGE_INTERVAL": "1"})
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    at = lines.index("tfrun: resources asked and used (samples in run.json):")
    assert lines[at + 1].split()[:2] == ["task", "cpus"]
    assert sorted(line.split()[0] for line in lines[at + 2:at + 4]) == ["worker:0", "worker:1"]
    # 3 s say too little to size a job by.
    assert not [line for line in lines if line.startswith("tfrun: sizing:")], lines
    own = {name: float(cpu) for name, cpu in
           re.findall(r"^\[(worker:\d)\] cpu ([0-9.]+)$", result.stdout, re.M)}
    assert sorted(own) == ["worker:0", "worker:1"], result.stdout
    for task in run_json(run_dir)["tasks"]:
        usage = task["attempts"][-1]["usage"]
        # The whole tree's, rounded to 0.01 s: at least what the command used.
        assert usage["wall_s"] >= 2.9 and usage["cpu_s"] >= own[task["name"]] - 0.01 > 0
        assert usage["peak_rss_mb"] >= 30 and usage["peak_tree_rss_mb"] >= 30
        assert usage["samples"] and usage["samples"][0]["t"] >= 0.9


@pytest.mark.waits
def test_run_json_has_peaks_and_samples_at_the_default_interval(tmp_path):
    """A worker of ~300 MB that computes 2.5 s, then waits: its peaks, its
    cpu-seconds and the samples of the default 10-s interval in run.json.
    (Plain Python: what is measured is the process tree, whatever runs in
    it; a TensorFlow worker here cost ~10 s of CPU to import.)"""
    run_dir = str(tmp_path / "run")
    work = ("%s -c 'import time\nheld = bytearray(300 << 20)\nfor at in range(0, len(held), 4096):"
            "\n    held[at] = 1\nend = time.process_time() + 2.5\nwhile time.process_time() < end:"
            "\n    pass\nend = time.monotonic() + 12\nwhile time.monotonic() < end:\n"
            "    time.sleep(0.5)\nprint(\"trained\")'" % sys.executable)
    result = run_tfrun("-w", "1", "-s", "0", "-Cw", "1", "-Mw", "2048", "--run-dir", run_dir,
                       "--", work, timeout=240)
    assert result.returncode == 0, result.stderr
    assert "[worker:0] trained" in result.stdout
    usage = run_json(run_dir)["tasks"][0]["attempts"][-1]["usage"]
    assert usage["peak_rss_mb"] > 250 and usage["peak_tree_rss_mb"] >= usage["peak_rss_mb"]
    assert usage["cpu_s"] > 2 and usage["wall_s"] > 12
    assert usage["samples"] and usage["samples"][0]["t"] >= 10
    assert usage["samples"][0]["rss_mb"] > 250
    assert "worker:0" in result.stderr.split("resources asked and used")[1]


@needs_cgroups
def test_cgroups_are_gone_after_a_run(tmp_path):
    run_dir = str(tmp_path / "run")
    result = run_tfrun("-w", "2", "-s", "1", *TINY, "--run-dir", run_dir, "--",
                       "echo hi; sleep 0.5")
    assert result.returncode == 0, result.stderr
    run_id = run_json(run_dir)["run_id"]
    # Nor, within seconds (a cleaner of their own removes them after tfrun
    # exits), any master's whose process is gone (this run's, or one killed
    # earlier: a new master removes those first).
    left = []

    def none_left():
        left[:] = [path for path in glob.glob("/sys/fs/cgroup/*/mesos_local/*/*")
                   if ".%s." % run_id in path] + [
            path for path in glob.glob("/sys/fs/cgroup/*/mesos_local/*")
            if os.path.isdir(path) and _owner_gone(path)]
        return not left
    wait_until(none_left, 20, message=lambda: "cgroups left: %s" % left)


def _owner_gone(path):
    pid = cgroup_master_pid(os.path.basename(path))
    return pid is not None and not os.path.exists("/proc/%d" % pid)


def test_a_table_of_hundreds_of_tasks_shows_each_jobs_extremes_and_counts_the_rest():
    """A 500-task run printed 500 lines at its end: past MAX_ROWS tasks, the
    table keeps what the sizing hints speak of, each job's largest peak and
    busiest task."""
    tasks = [("ps:0", "ps", 1, 1024, used(6.0, 60.0, 300.0))]
    tasks += [("worker:%d" % i, "worker", 1, 1024, used(30.0, 60.0, 500.0))
              for i in range(499)]
    tasks[200] = ("worker:199", "worker", 1, 1024, used(30.0, 60.0, 1000.0))  # largest peak
    tasks[301] = ("worker:300", "worker", 1, 1024, used(59.0, 60.0, 400.0))  # busiest
    lines = table_lines(usage_rows(record(*tasks)))
    assert [line.split()[0] for line in lines] == ["task", "ps:0", "worker:199", "worker:300",
                                                   "(497"]
    assert lines[-1] == ("  (497 more tasks; above, each job's largest peak and busiest: "
                         "tfmesos report lists them all)")
    # The hints still read every task.
    assert [hint for hint in hints(usage_rows(record(*tasks)))
            if hint.startswith("worker's processes peaked at 1000 MB RSS of its 1024 MB")]


def test_a_table_up_to_max_rows_lists_every_task():
    tasks = [("worker:%d" % i, "worker", 1, 1024, used(30.0, 60.0, 500.0))
             for i in range(MAX_ROWS)]
    lines = table_lines(usage_rows(record(*tasks)))
    assert len(lines) == 1 + MAX_ROWS and not lines[-1].startswith("  (")


def test_a_look_reads_the_tree_and_new_processes_not_the_machine_s_others(tmp_path, monkeypatch):
    """Each task's monitor read every process's stat each second: N tasks on
    a host, N times its processes. Now the ones neither in the tree nor new
    since the last look are skipped (they cannot join it), but for one full
    look in FULL_LOOK_EVERY (a pid reused meanwhile shows then)."""
    proc = tmp_path / "proc"

    def process(pid, ppid, session, rss_pages=10):
        (proc / str(pid)).mkdir(parents=True, exist_ok=True)
        # pid (comm) state ppid pgrp session ... utime stime cutime cstime ... rss
        fields = ["S", str(ppid), str(pid), str(session)] + ["0"] * 7 + ["1", "1", "0", "0"] \
            + ["0"] * 6 + [str(rss_pages)]
        (proc / str(pid) / "stat").write_text("%d (x) %s\n" % (pid, " ".join(fields)))
        (proc / str(pid) / "status").write_text("VmHWM:\t40 kB\n")

    process(1, 0, 1)
    for other in range(500, 540):                # the machine's others
        process(other, 1, other)
    process(100, 1, 100)                         # the task's command, its own session
    process(101, 100, 100)
    reads = []
    real = task_usage._read
    monkeypatch.setattr(task_usage, "_read", lambda path: reads.append(path) or real(path))
    monitor = task_usage.UsageMonitor(100, proc=str(proc), peak_interval=600.0)
    assert monitor.observe() == {100, 101}       # the first look reads all
    assert len([p for p in reads if p.endswith("stat")]) == 43
    reads.clear()
    process(102, 101, 100)                       # a new one in the tree
    process(600, 1, 600)                         # a new one elsewhere
    assert monitor.observe() == {100, 101, 102}
    assert sorted(int(p.split("/")[-2]) for p in reads if p.endswith("stat")) == \
        [100, 101, 102, 600]
    reads.clear()
    assert monitor.observe() == {100, 101, 102}
    assert sorted(int(p.split("/")[-2]) for p in reads if p.endswith("stat")) == [100, 101, 102]
    process(520, 102, 100)                       # pid 520 reused inside the tree: not seen
    assert monitor.observe() == {100, 101, 102}
    while monitor._looks % task_usage.FULL_LOOK_EVERY:
        monitor.observe()
    assert monitor.observe() == {100, 101, 102, 520}   # until a full look
