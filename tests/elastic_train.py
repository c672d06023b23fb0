"""examples/torch_ddp.py under torchrun for test_torch_elastic: with
``--hold-at EPOCH:STEP --pid-file FILE`` (each may be given again), the
first process of task worker:1 (whichever rank the rendezvous gave it) to
get to the n-th hold point writes its pid to ``FILE.n`` (made
exclusively: once a run) and waits there, mid-epoch, for the test to kill
it (or its torchrun); the other rank waits for it in DDP's gradient
all-reduce meanwhile. Every other argument is the example's."""

import argparse
import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))

import torch_ddp  # noqa: E402  (examples/ on the path first)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hold-at", required=True, action="append", metavar="EPOCH:STEP")
    parser.add_argument("--pid-file", required=True)
    own, rest = parser.parse_known_args()
    holds = [tuple(int(n) for n in point.split(":")) for point in own.hold_at]

    def on_step(at_epoch, at_step, rank):
        if os.environ.get("TFMESOS_TASK_INDEX") != "1" or (at_epoch, at_step) not in holds:
            return
        number = holds.index((at_epoch, at_step)) + 1
        try:
            fd = os.open("%s.%d" % (own.pid_file, number),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return   # held there once already: this is a restarted worker
        os.write(fd, b"%d\n" % os.getpid())
        os.close(fd)
        print("holding at epoch %d step %d" % (at_epoch + 1, at_step), flush=True)
        threading.Event().wait()   # until killed

    torch_ddp.main(rest, on_step=on_step)


if __name__ == "__main__":
    main()
