"""A replica-mode task that reports its role and checks that what tfrun
substituted into its command line agrees with TF_CONFIG. No TensorFlow
needed, so it starts in a blink:

    tfrun -w 2 -s 1 -- python examples/replica_hello.py \\
        --ps_hosts {ps_hosts} --worker_hosts {worker_hosts} \\
        --job_name {job_name} --task_index {task_index}
Exits 1 when the placeholders and TF_CONFIG disagree.
"""

import argparse
import json
import os
import sys


def hosts(text):
    return [h for h in text.split(",") if h]


def placeholder_parser(description):
    """The four arguments tfrun's placeholders fill in."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--ps_hosts", type=hosts, default=[])
    parser.add_argument("--worker_hosts", type=hosts, required=True)
    parser.add_argument("--job_name", required=True)
    parser.add_argument("--task_index", type=int, required=True)
    return parser


def problems_with(args, config):
    """Where the substituted arguments and TF_CONFIG disagree."""
    problems = []
    if config["task"] != {"type": args.job_name, "index": args.task_index}:
        problems.append("task %r != %s:%d" % (config["task"], args.job_name, args.task_index))
    for job, listed in (("ps", args.ps_hosts), ("worker", args.worker_hosts)):
        if config["cluster"].get(job, []) != listed:
            problems.append("%s hosts %r != TF_CONFIG %r"
                            % (job, listed, config["cluster"].get(job)))
    if os.environ.get("TFMESOS_JOB_NAME") != args.job_name:
        problems.append("TFMESOS_JOB_NAME=%r" % os.environ.get("TFMESOS_JOB_NAME"))
    return problems


def report(problems):
    for problem in problems:
        print("MISMATCH: %s" % problem, file=sys.stderr)
    print("placeholders and TF_CONFIG %s" % ("agree" if not problems else "DISAGREE"), flush=True)


def main(argv=None):
    args = placeholder_parser(__doc__.splitlines()[0]).parse_args(argv)
    config = json.loads(os.environ["TF_CONFIG"])
    print("hello from %s:%d" % (args.job_name, args.task_index))
    print("ps_hosts=%s worker_hosts=%s" % (",".join(args.ps_hosts), ",".join(args.worker_hosts)))
    print("TF_CONFIG=%s" % json.dumps(config, sort_keys=True))
    problems = problems_with(args, config)
    report(problems)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
