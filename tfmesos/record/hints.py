"""One line of advice for the usual ways distributed TensorFlow, Keras,
PyTorch and JAX fail, and tasks fail before they reach tfrun (no tfmesos or no interpreter
on the agent, a fetch that failed, an unknown user), read from what the
failed task printed last (its stderr: forwarded, or read from its Mesos
sandbox), its exit code and Mesos' message about it: never from guesses at
the user's program.

``RULES`` is the table, most specific first; the first rule that matches
gives the hint. A rule matches when its ``pattern`` is found in one of the
lines (or in Mesos' message), or when the exit code is one of its
``exit_codes`` (a ``without_gpus`` rule: only in a task without GPUs; a
``across_lines`` rule's pattern is searched in the lines joined, ``^`` and
``$`` at each line's ends: a block of several lines). A command quoted in
a line ("cannot start 'COMMAND': why", the local agents' words) is left out
first: a rule reads why the task failed, never the words of its command.
Its ``hint`` may name the pattern's groups (``{module}``), ``{memory}``:
the tfrun option that gives the failed task's job 4 GB, and ``{gpus}``:
the option that gives its job GPUs.
"""

import dataclasses
import re
from collections.abc import Iterable, Sequence
from typing import Optional, Union

from ..field_methods import FrozenFieldMethods
from ..terminal_text import printable

LINES = 40   # how many of the task's last stderr lines are read

# tfrun's options for a job's resources: -Mw (mem of the workers), -Cs, -Gc, ...
_FLAG_LETTER = {"worker": "w", "evaluator": "w", "ps": "s", "chief": "c"}
_FLAG_KIND = {"mem": "M", "cpus": "C", "gpus": "G"}


def resource_flag(job: str, resource: str = "mem") -> str:
    """The tfrun option that sets ``resource`` (mem, cpus, gpus) of ``job``'s
    tasks: ``-Mw``, ``-Cs``, else ``--job NAME:COUNT:CPUS:MEM``."""
    letter = _FLAG_LETTER.get(job)
    if letter is None:
        return "--job %s:COUNT:CPUS:MEM" % job
    return "-%s%s" % (_FLAG_KIND[resource], letter)


def memory_option(job: Optional[str], megabytes: int = 4096) -> str:
    """``-Mw 4096`` for a worker (or no job); ``--job NAME:COUNT:CPUS:4096``
    for a job without an option of its own."""
    flag = resource_flag(job or "worker")
    if flag.startswith("--job"):
        return flag.replace("MEM", str(megabytes))
    return "%s %d" % (flag, megabytes)


def gpu_option(job: Optional[str]) -> str:
    """``-Gw`` for a worker (or no job); ``--job NAME:COUNT:CPUS:MEM:GPUS``
    for a job without an option of its own."""
    flag = resource_flag(job or "worker", "gpus")
    return flag + ":GPUS" if flag.startswith("--job") else flag


# What a shell says before a command it cannot find: dash's ``sh: 1: exec: X:
# not found``, bash's ``bash: line 1: X: command not found``.
_SHELL = r"^(?:\S*/)?(?:sh|bash|dash|zsh)(?:: line \d+)?: (?:\d+: )?(?:exec: )?"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Rule(FrozenFieldMethods):
    name: str
    hint: str
    pattern: Optional[str] = None
    exit_codes: frozenset[int] = frozenset()
    # It applies only to a task known to have no GPUs (its job's, run.json).
    without_gpus: bool = False
    # Its pattern spans lines: searched in them joined by newlines (re.M).
    across_lines: bool = False

    def match(self, lines: Sequence[str], exit_code: Optional[int], gpus: Optional[int] = None
              ) -> Optional[dict[str, Optional[str]]]:
        """The pattern's groups when the rule applies (to a task of ``gpus``
        GPUs, None when unknown), else None."""
        if self.without_gpus and gpus != 0:
            return None
        if self.pattern is not None and self.across_lines:
            found_all = list(re.finditer(self.pattern, "\n".join(lines), re.M))
            if found_all:
                return found_all[-1].groupdict()
        elif self.pattern is not None:
            compiled = re.compile(self.pattern)
            for line in reversed(lines):
                found = compiled.search(line)
                if found:
                    return found.groupdict()
        if exit_code is not None and exit_code in self.exit_codes:
            return {}
        return None


RULES = (
    Rule("ps-with-multi-worker-mirrored",
         "MultiWorkerMirroredStrategy takes no ps tasks: run with -s 0 (tfrun starts 1 ps "
         "unless told otherwise)",
         r"There is no id for task_type '?ps'?"),
    # keras-team/keras#20585: Keras 3's model.fit hands PerReplica values to
    # ops. The error's first line may be hundreds of tensor lines up; its
    # last one names the class.
    Rule("keras3-multi-worker",
         "Keras 3's model.fit does not train under MultiWorkerMirroredStrategy "
         "(keras-team/keras#20585): use tf_keras (TF_USE_LEGACY_KERAS=1), Keras 3 on JAX "
         "with keras.distribution, or a custom training loop; see the README, \"Which Keras?\"",
         r"Attempt to convert a value \(PerReplica:|"
         r"unsupported type \(<class '[\w.]*PerReplica'>\)"),
    # Mesos' docker executor's message when its container's run failed with
    # the engine (src/docker/executor.cpp, reaped): the output stream broke
    # too, a "Connection reset by peer" the collective rule would take.
    Rule("docker-engine-gone",
         "the Docker engine on the task's agent stopped answering while its container ran "
         "(stopped or restarted: an upgrade of docker.io restarts it): make sure it runs "
         "there, then run again",
         r"^Docker container run error: "),
    # Before a task reaches tfrun (its sandbox's stderr, Mesos' message).
    Rule("no-tfmesos",
         "tfmesos cannot be imported where the task runs (the agent's Python lacks it, or "
         "does not see this checkout): run with --ship, which sends tfmesos' task side with "
         "every task, or install tfmesos on the agents (--python names their interpreter)",
         r"No module named '?tfmesos\b"),
    Rule("python-not-found",
         "'{program}' does not exist on the agent (Debian and Ubuntu have python3, not "
         "python): write python3, or give --python with an interpreter the agents have",
         _SHELL + r"(?P<program>(?:\S*/)?python[\w.]*): (?:command )?not found"),
    Rule("path-not-found",
         "'{program}' does not exist on the agent: give a path the agents have (--python "
         "names the tasks' interpreter), or ship it with your code (--ship)",
         _SHELL + r"(?P<program>\S*/[^\s:]+): (?:command )?not found"),
    Rule("command-not-found",
         "'{program}' is not on the agent's PATH: install it on the agents, give its full "
         "path, or ship it with your code (--ship)",
         _SHELL + r"(?P<program>[^\s:]+): (?:command )?not found"),
    # Out of file descriptors (EMFILE; ENFILE: "... in system"), wherever it
    # struck: the bundle server (its 503), the fetcher, the sandbox, the
    # task's start, the task itself. Before the fetch rules: "Failed to
    # fetch" of it is no missing file.
    Rule("too-many-open-files",
         "a process ran out of file descriptors (Too many open files): raise the open-file "
         "limit (ulimit -n: the agents', e.g. their LimitNOFILE=, and that of tfrun or of "
         "the program that calls tfmesos.run, which serves the shipped files and runs the "
         "embedded local master's tasks), or run fewer tasks",
         r"Too many open files|\bE[MN]FILE\b"),
    # exec() refused the task's command and environment (E2BIG).
    Rule("argument-list-too-long",
         "the task's environment and command were too big to start it (Argument list too "
         "long): Linux takes at most 128 KiB in one variable or argument, and ARG_MAX (a "
         "quarter of ulimit -s, 2 MiB by default) in all: pass big values in a file (--ship, "
         "tfmesos.run(ship=...)), not in environment variables (-E, env=) or the command",
         r"Argument list too long|\bE2BIG\b"),
    # A full disk (ENOSPC, EDQUOT): a fetch into the sandbox, or the task's
    # own writes. Before "Failed to fetch": no missing file either.
    Rule("no-space",
         "a disk on the agent is full (No space left on device): free space there; a task's "
         "sandbox, where what it fetches lands, is under the agent's --work_dir (the embedded "
         "local master's: under TMPDIR, else /tmp: point TMPDIR at a bigger file system)",
         r"No space left on device|Disk quota exceeded|\bENOSPC\b|\bEDQUOT\b"),
    Rule("rendezvous-unreachable",
         "the task could not reach tfrun at {address}, the address tfrun gives its tasks "
         "(--advertise-address; by default its own towards the master): every agent must "
         "reach it, through firewalls and from network namespaces too, and none on another "
         "host reaches a loopback one: give an address of this machine the agents reach",
         r"cannot register with the tfmesos scheduler at (?P<address>\S+): .*(?:[Cc]onnection "
         r"refused|timed out|[Nn]o route to host|[Nn]etwork is unreachable)"),
    Rule("fetch-unreachable",
         "the agent could not connect to the URL it fetches for the task (in the message): "
         "tfrun --ship serves its files at --advertise-address (default: its address "
         "towards the master), which every agent must reach, through firewalls too; so "
         "must a --python-env URL",
         r"Failed to fetch.*(?:[Cc]onnection refused|timed out|[Nn]o route to host|"
         r"[Nn]etwork is unreachable|[Cc]ouldn't connect|Failed to connect|"
         r"[Nn]ame or service not known|Could not resolve)"),
    # The task's own command (tfmesos/ship/fetch_check.py), before anything
    # it fetched ran.
    Rule("fetch-changed",
         "a file the task fetched is not the one tfrun shipped (its sha256 is in the line "
         "above), so the task refused to run anything: something between tfrun and the agent "
         "changed it (a proxy or cache on the way, the agent's fetcher cache, an attacker); "
         "check the path from the agents to tfrun's --advertise-address",
         r"^tfmesos: .+ sha256 \S+ != expected [0-9a-f]{64}: refusing to run it"),
    Rule("no-sha256sum",
         "the agent (or the image) has no sha256sum, which the task's command checks what it "
         "fetched with: install coreutils there",
         r"^tfmesos: this agent has no sha256sum"),
    # The local master's fetcher refuses the archive itself
    # (mesos_local/containerizer/archives.py, REFUSED): fetching it again
    # cannot help (core/task_ends.py).
    Rule("fetch-archive-refused",
         "the local master's fetcher refused the archive it was to extract (the member and "
         "the rule in the message): it extracts only what stays inside the sandbox (relative "
         "paths, links that point inside it, no devices) and within its size bounds, where a "
         "Mesos agent's tar takes more; give a --python-env archive as a file (tfrun serves it "
         "and its tasks extract it with tar) or make it with conda-pack",
         r"Failed to fetch '.*': the local master's fetcher refuses this archive: "),
    Rule("fetch-failed",
         "the agent could not fetch what the task needs (the URL or file in the message): "
         "check that it exists and that the agents may read it",
         r"Failed to fetch"),
    Rule("unknown-user",
         "user '{user}' does not exist on the agent: run as a user every agent has "
         "(tfrun -u USER; default: you), or create it there",
         r"(?:No such user|[Ff]ailed to get user information for|[Uu]nknown user:?|"
         r"container user|unable to find user) '?(?P<user>[\w.$-]+)'?"),
    Rule("missing-module",
         "Python module '{module}' is missing where the task runs: install it on the agents "
         "or in the image, bring an environment that has it (--python-env), or ship it with "
         "your code (--ship); --python names another interpreter",
         r"(?:ModuleNotFoundError|ImportError): No module named '(?P<module>[\w.]+)'"),
    # Lightning's Trainer without num_nodes under tfrun --torch: its world is
    # the task's devices, and worker 1 asks gloo for rank 1 of 1
    # (gloo/context.cc's enforce; NCCL's rank check says other words).
    Rule("lightning-world-size",
         "the script's world size differs from tfrun's WORLD_SIZE (rank {rank} in a group of "
         "{size}); under Lightning give Trainer(num_nodes=int(os.environ['GROUP_WORLD_SIZE']), "
         "devices=int(os.environ['LOCAL_WORLD_SIZE']))",
         r"gloo/context\.cc:\d+\] rank < size\. (?P<rank>\d+) vs (?P<size>\d+)"),
    # PyTorch and JAX (issue 36): a script for torchrun or Slurm run as a
    # plain command. torch/distributed/rendezvous.py _env_rendezvous_handler
    # reads RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, in that order.
    Rule("torch-not-launched",
         "the script expects torchrun's variables ({variable} and the rest: "
         "init_process_group's env://): run it with tfrun --torch (tfmesos.run: "
         "framework=\"torch\"), which gives every worker MASTER_ADDR, MASTER_PORT, RANK and "
         "WORLD_SIZE",
         r"Error initializing torch\.distributed using env:// rendezvous: environment variable "
         r"(?P<variable>\w+) expected, but not set"),
    # ProcessGroupNCCL.cpp refuses a process without GPUs; a CPU build of
    # PyTorch has no NCCL (distributed_c10d.py _new_process_group_helper).
    Rule("nccl-without-gpus",
         "NCCL runs on GPUs only and this task has none: use backend gloo "
         "(init_process_group(\"gloo\")), or give the workers GPUs with {gpus} (and a CUDA "
         "build of PyTorch)",
         r"ProcessGroupNCCL is only supported with GPUs, no GPUs found|"
         r"Distributed package doesn't have NCCL built in"),
    Rule("nccl-error-without-gpus",
         "an NCCL error in a task without GPUs: NCCL runs on GPUs only; use backend gloo "
         "(init_process_group(\"gloo\")), or give the workers GPUs with {gpus}",
         r"NCCL [Ee]rror|ncclInternalError|ncclSystemError|ncclInvalidUsage",
         without_gpus=True),
    # jax/_src/distributed.py State.initialize: nothing told it its cluster.
    Rule("jax-not-launched",
         "jax.distributed.initialize() was not told its coordinator, process count and id: "
         "run with tfrun --jax (tfmesos.run: framework=\"jax\"), which sets them for every "
         "worker, or pass coordinator_address, num_processes and process_id",
         r"coordinator_address should be defined|Number of processes must be defined|"
         r"The process id of the current process must be defined"),
    # torch's TCPStore (torch/csrc/distributed/c10d/TCPStore*.cpp): worker 0
    # hosts it; init_process_group waits there for every rank.
    Rule("torch-ranks-missing",
         "only {joined} of the {world} ranks joined the process group at worker 0's store "
         "before its timeout: a worker failed or hangs before init_process_group, or is "
         "told another WORLD_SIZE (a script that sets its own); look at the other workers' "
         "logs (the run directory, or tfrun --logs all)",
         r"Timed out after \d+ seconds waiting for clients\. (?P<joined>\d+)/(?P<world>\d+) "
         r"clients joined"),
    Rule("torch-store-unreachable",
         "this rank could not reach the process group's store at {host}:{port} "
         "(MASTER_ADDR:MASTER_PORT, on worker:0 under tfrun --torch): worker:0 failed or "
         "hangs before init_process_group, or a firewall between the agents blocks the port; "
         "look at worker:0's log",
         r"client socket has timed out after .* while trying to connect to "
         r"\(\[?(?P<host>[^,\]]+)\]?, (?P<port>\d+)\)"),
    Rule("torch-store-timeout",
         "a rank waited for the others at the process group's store until its timeout: a "
         "worker failed, hangs, or never reached the same call (init_process_group, a "
         "barrier); look at the other workers' logs (the run directory, or tfrun --logs all)",
         r"Socket Timeout|DistStoreError: .*[Tt]imed? ?out"),
    Rule("address-in-use",
         "a port the task listens on was taken on its agent: listen on the addresses tfrun "
         "gives (TF_CONFIG, {{worker_hosts}}, TFMESOS_PORT), not on fixed ports; if it did, "
         "another program on the agent holds a port Mesos offers (the agent's --resources "
         "ports overlap a service there: ask its operator)",
         r"[Aa]ddress already in use|EADDRINUSE|Could not start gRPC server|"
         r"Failed to add port to server"),
    Rule("gpu-memory",
         "the GPU ran out of memory: use a smaller batch or model, or more GPUs",
         r"OOM when allocating tensor.*device:GPU|CUDA_ERROR_OUT_OF_MEMORY|"
         r"CUDA out of memory|RESOURCE_EXHAUSTED: Out of memory while trying to allocate"),
    Rule("memory",
         "the task ran out of memory: give it more, e.g. tfrun {memory} (MB; the default "
         "is 1024)",
         # Mesos' memory limit: src/slave/containerizer/mesos/isolators/cgroups/
         # subsystems/memory.cpp, "Memory limit exceeded: Requested: ...".
         # Not the shell's "Killed" alone: it says SIGKILL, whoever sent it (a
         # kill -9 read "the task ran out of memory" at 20 of 1024 MB); that
         # exit (137) is the hedged "killed" below.
         r"Memory limit exceeded|\bMemoryError\b|std::bad_alloc|OOM when allocating tensor|"
         r"[Oo]ut of memory"),
    # 137 = 128 + SIGKILL: what the kernel's OOM killer and a cgroup memory
    # limit leave, though not only they.
    Rule("killed",
         "the task was killed with SIGKILL (exit code 137), as the OOM killer and memory "
         "limits do: if it ran out of memory, give it more, e.g. tfrun {memory} (MB; the "
         "default is 1024)",
         exit_codes=frozenset({137})),
    Rule("peer-gone",
         "a collective or gRPC call to another task timed out or found it gone: a peer "
         "probably failed first; look at the other tasks' logs (the run directory, or "
         "tfrun --logs all)",
         r"DEADLINE_EXCEEDED|DeadlineExceededError|\bUNAVAILABLE\b|UnavailableError|"
         r"[Cc]ollective ops? .*(?:timed out|is aborted)|failed to connect to all addresses|"
         r"Connection reset by peer|Connection closed by peer|Socket closed"),
    # torchrun in the task: its summary of the failed rank (torch/distributed/
    # elastic/multiprocessing/errors: ChildFailedError's "Root Cause" block),
    # whose exit code is not the task's (torchrun exits 1). Last: what the
    # rank itself printed above says more, when a rule knows it.
    Rule("torchrun-child-failed",
         "the training process (rank {rank}) exited with code {code}; torchrun's own exit "
         "code is 1 (the rank's own error is in its lines above torchrun's)",
         r"ChildFailedError:[\s\S]*?^Root Cause \(first observed failure\):[\s\S]*?"
         r"^\s*rank\s*: (?P<rank>\d+)\b.*\n\s*exitcode\s*: (?P<code>-?\d+)",
         across_lines=True),
)


# The local agents' words for a task whose command could not start
# (mesos_local's runner: "cannot start %r: why"): the command quoted whole,
# the fetch check's prefix with its own words for a missing sha256sum (and
# any text of the user's command) in it. Its Python repr, maybe cut short.
_QUOTED_COMMAND = re.compile(r"(cannot start )(?:'(?:[^'\\]|\\.)*(?:'|$)|"
                             r'"(?:[^"\\]|\\.)*(?:"|$))')


def unquoted_command(line: str) -> str:
    """``line`` without the command a "cannot start 'COMMAND': why" quotes:
    a rule reads why it failed, never the words of the command."""
    return _QUOTED_COMMAND.sub(r"\1the task's command", line)


def matching_rule(lines: Iterable[str], exit_code: Optional[int] = None, message: str = "",
                  rules: Iterable[Rule] = RULES, gpus: Optional[int] = None
                  ) -> Union[tuple[Rule, dict[str, Optional[str]]], tuple[None, None]]:
    """(the first rule of ``rules`` that matches, its pattern's groups), or
    (None, None); ``gpus``: the task's, None when unknown."""
    lines = [unquoted_command(line.rstrip("\n")) for line in lines]
    if message:
        lines.append(unquoted_command(message))
    for rule in rules:
        groups = rule.match(lines, exit_code, gpus)
        if groups is not None:
            return rule, groups
    return None, None


def hint_for(lines: Iterable[str], exit_code: Optional[int] = None, message: str = "",
             job: Optional[str] = None, gpus: Optional[int] = None) -> Optional[str]:
    """The one hint for a task that failed with ``exit_code`` after writing
    ``lines`` (its last stderr lines) and that Mesos reported with
    ``message``; ``job`` (``worker``) chooses the memory and GPU options
    named; ``gpus``: the task's (None when unknown). None when no rule
    matches."""
    rule, groups = matching_rule(lines, exit_code, message, gpus=gpus)
    if rule is None or groups is None:   # (both None, or neither)
        return None
    # What the task wrote is escaped: its output is anyone's to fill.
    shown = {name: None if value is None else printable(value) for name, value in groups.items()}
    return rule.hint.format(memory=memory_option(job), gpus=gpu_option(job), **shown)
