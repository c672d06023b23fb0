"""Driver throughput and latency against the embedded local master.

1. subscribe -> first offer: time from driver.start() to the first
   resourceOffers callback (median of several fresh subscriptions).
2. decode + dispatch: the OFFERS events a master with many agents really
   sent, captured from the wire, fed through the driver's path (RecordIO
   decoding, JSON, addict, dispatch to a scheduler callback): offers/second.
3. end to end: a live driver against a master with many agents, time until
   every agent's offer reached the callback.

    python benchmarks/offers.py [--agents 2000]
"""

import argparse
import getpass
import http.client
import json
import statistics
import threading
import time

from mesos_local import AgentSpec, LocalMaster
from tfmesos.mesos import MesosSchedulerDriver, Scheduler, recordio
from tfmesos.mesos.decoding import decode_event

FRAMEWORK = {"user": getpass.getuser(), "name": "bench"}


class Counter(Scheduler):
    def __init__(self, want=1):
        self.offers = 0
        self.want = want
        self.first = None
        self.done = threading.Event()

    def resourceOffers(self, driver, offers):
        if self.first is None:
            self.first = time.perf_counter()
        self.offers += len(offers)
        if self.offers >= self.want:
            self.done.set()


def agents(count):
    return [AgentSpec(hostname="agent%d" % i, cpus=8, mem=32768, disk=100000,
                      ports=((31000 + i * 10, 31009 + i * 10),), gpus=0) for i in range(count)]


def subscribe_latency(rounds):
    samples = []
    with LocalMaster(agents=agents(1)) as master:
        for _ in range(rounds):
            counter = Counter()
            driver = MesosSchedulerDriver(counter, FRAMEWORK, master.url)
            started = time.perf_counter()
            driver.start()
            counter.done.wait(10)
            samples.append(counter.first - started)
            driver.stop()
            driver.join(10)
    return samples


def capture_offer_stream(master, want):
    """Raw RecordIO bytes of a subscription until ``want`` offers were sent."""
    conn = http.client.HTTPConnection("127.0.0.1", int(master.url.rsplit(":", 1)[1]), timeout=30)
    body = json.dumps({"type": "SUBSCRIBE", "subscribe": {"framework_info": FRAMEWORK}})
    conn.request("POST", "/api/v1/scheduler", body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    decoder, raw, offers = recordio.Decoder(), bytearray(), 0
    while offers < want:
        chunk = response.read1(1 << 16)
        raw += chunk
        for record in decoder.feed(chunk):
            event = json.loads(record)
            if event["type"] == "OFFERS":
                offers += len(event["offers"]["offers"])
    conn.close()
    return bytes(raw), offers


def dispatch_rate(raw, offers, repeats):
    counter = Counter(want=offers * repeats)
    driver = MesosSchedulerDriver(counter, FRAMEWORK, "127.0.0.1:1")
    started = time.perf_counter()
    for _ in range(repeats):
        decoder = recordio.Decoder()
        for start in range(0, len(raw), 1 << 16):  # network-sized chunks
            for record in decoder.feed(raw[start:start + (1 << 16)]):
                event = decode_event(record)
                if event["type"] != "HEARTBEAT":
                    driver._dispatch(event["type"], event)
    elapsed = time.perf_counter() - started
    return counter.offers / elapsed


def end_to_end(master, want):
    counter = Counter(want)
    driver = MesosSchedulerDriver(counter, FRAMEWORK, master.url)
    started = time.perf_counter()
    driver.start()
    counter.done.wait(60)
    elapsed = time.perf_counter() - started
    driver.stop()
    driver.join(10)
    return counter.offers / elapsed, elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    latency = subscribe_latency(args.rounds)
    print("subscribe -> first offer: median %.1f ms, max %.1f ms over %d subscriptions "
          "(target < 100 ms)" % (statistics.median(latency) * 1e3, max(latency) * 1e3, len(latency)))
    with LocalMaster(agents=agents(args.agents)) as master:
        raw, offers = capture_offer_stream(master, args.agents)
        rate = dispatch_rate(raw, offers, repeats=5)
        print("decode + dispatch: %.0f offers/s (%d offers, %d KiB of RecordIO, replayed 5 times; "
              "target >= 10000/s)" % (rate, offers, len(raw) // 1024))
    with LocalMaster(agents=agents(args.agents)) as master:
        rate, elapsed = end_to_end(master, args.agents)
        print("end to end (master builds and sends, driver decodes and dispatches): "
              "%d offers in %.2f s = %.0f offers/s" % (args.agents, elapsed, rate))


if __name__ == "__main__":
    main()
