"""How long ``placement.place`` takes for one big round of offers, against
a naive reference (every offer deep-copied, every offer checked for every
task: tests/test_placement.py's ``reference_place``), both in this process.

* cpu-only: 1,000 one-cpu tasks over 100 offers of 32 cpus, 8 GPUs and
  1,000 ports (every task spills onto GPU agents' cpus/mem);
* gpu-mixed: 100 two-GPU tasks and 1,000 one-cpu tasks over 50 GPU offers
  (SCALAR and SET GPUs) and 50 GPU-less offers of 16 cpus.

    python benchmarks/placement.py [--rounds 9]
"""

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from offers import offer
from test_placement import reference_place

from tfmesos.core.placement import TaskRequest, place

MEM = 1 << 20
PORTS = ((31000, 31999),)


def cpu_only():
    offers = [offer("o%d" % i, cpus=32, mem=MEM, gpus=8, ports=PORTS) for i in range(100)]
    return [TaskRequest(i, 1, 64) for i in range(1000)], offers


def gpu_mixed():
    ids = [str(i) for i in range(8)]
    offers = []
    for i in range(50):
        gpus = {"gpus": 8} if i % 2 else {"gpu_set": ids}
        offers.append(offer("g%d" % i, cpus=32, mem=MEM, ports=PORTS, **gpus))
        offers.append(offer("p%d" % i, cpus=16, mem=MEM, ports=PORTS))
    requests = [TaskRequest("gpu%d" % i, 4, 1024, gpus=2) for i in range(100)]
    return requests + [TaskRequest(i, 1, 64) for i in range(1000)], offers


def median_ms(function, requests, offers, rounds):
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        result = function(requests, offers)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000, result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    for name, scenario in (("cpu-only", cpu_only), ("gpu-mixed", gpu_mixed)):
        requests, offers = scenario()
        fast, result = median_ms(place, requests, offers, args.rounds)
        naive, _ = median_ms(reference_place, requests, offers, max(3, args.rounds // 3))
        placed = sum(len(a) for a in result.launches.values())
        print("%-9s %4d tasks, %3d offers: place %6.1f ms, naive reference %7.1f ms, "
              "ratio %5.1fx  (%d placed)" % (name, len(requests), len(offers), fast, naive,
                                            naive / fast, placed))


if __name__ == "__main__":
    main()
