"""The run directory's log files: a run of hundreds of tasks holds a bounded
number of them open (two per task reached the common limit of 1,024 open
files at 200 tasks), and nothing written is lost when one is closed."""

import os
import stat
import threading

from tfmesos.record import task_logs
from tfmesos.record.schema import Logs
from tfmesos.record.task_logs import TaskLogs


def open_in(directory):
    """How many of this process's descriptors are files in ``directory``
    (not a count of all: other threads of the test process open and close theirs)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(os.path.join("/proc/self/fd", fd))
        except OSError:
            continue   # closed meanwhile
        count += os.path.dirname(target) == str(directory)
    return count


def test_hundreds_of_tasks_hold_a_bounded_number_of_log_files_open(tmp_path):
    logs = TaskLogs(str(tmp_path), threading.RLock())
    names = ["worker.%d.stderr" % index for index in range(300)]
    for name in names:
        logs.write(name, "first of %s\n" % name)
    assert open_in(tmp_path) == task_logs.OPEN_FILES
    for name in reversed(names):   # every one closed by now is opened again, to append
        logs.write(name, "second\n")
    assert open_in(tmp_path) == task_logs.OPEN_FILES
    logs.close()
    assert open_in(tmp_path) == 0
    for name in names:
        assert (tmp_path / name).read_text() == "first of %s\nsecond\n" % name
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600


def test_created_log_files_are_empty_private_and_not_held_open(tmp_path):
    (tmp_path / "worker.0.stdout").write_text("an earlier run's\n")   # a reused directory
    logs = TaskLogs(str(tmp_path), threading.RLock())
    for index in range(100):
        logs.create(Logs("worker.%d.stdout" % index, "worker.%d.stderr" % index))
    assert open_in(tmp_path) == 0
    assert (tmp_path / "worker.0.stdout").read_text() == ""
    assert stat.S_IMODE((tmp_path / "worker.99.stderr").stat().st_mode) == 0o600
    logs.write("worker.0.stdout", "hi\n")
    logs.create(Logs("worker.0.stdout", "worker.0.stderr"))   # created: left as it is
    logs.close()
    assert (tmp_path / "worker.0.stdout").read_text() == "hi\n"
    assert len(list(tmp_path.iterdir())) == 200


def test_the_record_s_logs_of_more_tasks_than_it_holds_open_read_back_whole(tmp_path):
    # Where the record meets its log files: output forwarded by more tasks
    # than are held open, interleaved, reads back whole through the record
    # (what the hints and tfrun's failure lines read), each file its task's.
    from tfmesos.core.jobs import Job
    from tfmesos.core.placement import Assignment
    from tfmesos.core.scheduler import Launch
    from tfmesos.core.slots import make_slots
    from tfmesos.record.run_record import RunRecord
    from tfmesos.record.schema import RunFile

    count = task_logs.OPEN_FILES + 8
    slots = make_slots([Job("worker", count)])
    record = RunRecord(str(tmp_path), RunFile(mode="replica"), slots, forwarding=True)
    for number, slot in enumerate(slots, 1):
        assignment = Assignment(None, "o1", "a1", "host", [], 31000 + number, [])
        record.launched(Launch(slot, "t-%s" % slot.name, 1, "o1", assignment))
    record.save()   # creates every attempt's files, as at the launch
    for line in range(3):
        for slot in slots:
            record.output("t-%s" % slot.name, "stderr", "%s line %d\n" % (slot.name, line))
    record.finish(None, None)
    for slot in slots:
        assert record.tail(slot.name, "stderr") == ["%s line %d" % (slot.name, line)
                                                    for line in range(3)]
        assert record.tail(slot.name, "stdout") == []
    assert open_in(tmp_path) == 0
