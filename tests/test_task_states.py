"""What tfmesos reads of Mesos' task status messages."""

import pytest

from tfmesos.mesos.task_states import exit_code_of


@pytest.mark.parametrize("message, code", [
    ("Command exited with status 3", 3),
    ("Container exited with status 0", 0),
    # The command executor's words for a command a signal ended
    # (src/launcher/executor.cpp: "Command terminated with signal " +
    # strsignal(WTERMSIG(status))): the run's exit code was null, where a
    # shell says 128 + N.
    ("Command terminated with signal Killed", 137),
    ("Command terminated with signal Segmentation fault", 139),
    ("Command terminated with signal Terminated", 143),
    # WCOREDUMP adds " (core dumped)" (src/common/status_utils.hpp): the code
    # was null (found by a review helper against the sources).
    ("Command terminated with signal Aborted (core dumped)", 134),
    ("Command terminated with signal Segmentation fault (core dumped)", 139),
    ("Command terminated with signal Unknown signal 99", None),
    ("Memory limit exceeded: Requested: 64MB Maximum Used: 64MB", None),
    ("", None),
    (None, None),
])
def test_the_exit_code_of_a_status_message(message, code):
    assert exit_code_of(message) == code
