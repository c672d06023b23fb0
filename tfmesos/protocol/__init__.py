"""What the scheduler and its tasks share, the only tfmesos code both sides
import (it travels with the task side, stdlib only): the frames of the
rendezvous (``wire``), the names of the task's environment (``task_env``)
and ``host:port`` strings (``hostport``)."""
