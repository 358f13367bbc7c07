#!/usr/bin/env python3
"""The soak test (issue 17): chronoqd under a steady mixed load for a long
time, killed with SIGKILL every few minutes, sampled every 10 s.

    python3 bench/soak/soak.py --chronoqd build/release/src/server/chronoqd \\
        --duration 1h --kill-every 10m --out build/soak/<timestamp>

`make soak DURATION=1h [KILL_EVERY=10m] [SANITIZED=1]` runs it. It writes, in
--out: samples.csv (one row every 10 s), counts.json (what was enqueued,
acknowledged, delivered, found at the end), chronoqd.log (its stderr, every
restart appended), then runs verdict.py, which writes report.md and the PNG
plots and exits non-zero on a failed verdict.

Why Python with the standard library and clients/python, not a C++ tool: the
load is meant to be moderate (about 200 tasks/s and 300 requests/s, a small
fraction of what chronoqd does on these 2 cores, docs/BENCHMARKS.md), so that
chronoqd runs well below saturation (about 11% of one core in Release) and a
trend in the figures is the server's, not queueing. At that rate the driver
costs about 15% of one core (the `driver_cpu_pct` column says how much, every
10 s), it needs no build,
and it goes through the Python client users run, so the client's connection
handling after a kill is soaked too. Its latencies include the driver's own
scheduling under the GIL: they are for trends (first quarter against last),
not absolute figures; chronoq-bench measures those.

The load (rates at --load 1; every producer paces itself on the monotonic
clock, so the rate does not depend on latency):
- `soak.work`: single enqueues (60/s, half of them delayed 0.1-3 s) and
  batches (4/s of 25, a fifth delayed); two workers claim (long-poll, lease
  10 s), one acks each task with POST /ack, the other with POST /v1/acks;
  every tenth task is failed once with retry_in_ms 200, so retries run.
  Dispatch lateness = claim time - run_at of each task's first claim here.
- `soak.keyed`: 30/s over 16 keys, max_in_flight_per_key 1,
  max_pending_per_key 100 (a 429 is counted, not an error); one worker, its
  outcomes carried on its next claim.
- `soak.hooks`: 20/s with a webhook target on a local receiver
  (http.server in a thread), which counts deliveries per task.
- `soak.cron`: three schedules, cron `* * * * * *` (every second); one worker.
- locks: 20 acquire/release cycles a second on 8 keys (wait_ms 0, lease
  2 s), a few extended, a few abandoned to lapse.
Every task has a client id (`<kind>-<n>`) and is enqueued with
on_conflict "ignore", so an enqueue whose answer a kill lost is sent again
until chronoqd acknowledges it. Each queue keeps finished tasks 60 s
(retention_ms), so the database stays at a steady size instead of growing for
an hour, and purging is part of the load.

Nothing lost, counted at the end: producers stop, the workers drain the
queues (deadline 240 s), then every acknowledged enqueue must have been acked
by a worker (or delivered, for webhooks), or still be in chronoqd, or be one
whose ack was sent and its answer lost (a kill between commit and answer; the
task was then purged after its retention). Anything else is lost. Duplicates
(a second ack or delivery after a kill: at-least-once) are counted, allowed.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import glob
import http.server
import itertools
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))

from chronoq import Client  # noqa: E402
from chronoq.errors import ChronoqError, ConnectionFailed, OutcomeUnknown  # noqa: E402
from verdict import COLUMNS  # noqa: E402  (this directory is first on sys.path)

SAMPLE_EVERY_S = 10.0
# Errors the load provokes on purpose or that a kill causes: counted, not
# failures. Anything else (500, 400, an unexpected 409) fails the verdict.
EXPECTED_CODES = {
    "stale_token", "key_backlog_full", "lock_wait_timeout", "unavailable",
    "connection_failed", "outcome_unknown",
}
QUEUES = ["soak.work", "soak.keyed", "soak.hooks", "soak.cron"]
DRAIN_QUEUES = ["soak.work", "soak.keyed", "soak.hooks"]
KINDS = {"s": "single", "b": "batch", "k": "keyed", "w": "webhook"}


def parse_duration(text: str) -> float:
    m = re.fullmatch(r"(\d+)(s|m|h)?", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration is like 90s, 10m or 1h")
    return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


def percentile(values: List[float], p: float) -> Optional[float]:
    if not values:
        return None
    values = sorted(values)
    k = min(len(values) - 1, max(0, int(round(p / 100.0 * (len(values) - 1)))))
    return values[k]


def parse_time_ms(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """chronoqd as a child process on a fixed port and data dir: started,
    SIGKILLed and started again on the same data."""

    def __init__(self, binary: str, data: str, port: int, log_path: str, env: Dict[str, str]):
        self.binary, self.data, self.port = binary, data, port
        self.log = open(log_path, "ab")
        self.env = env
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.restarts = 0
        # Held across a kill and restart, so that a sample is never taken of
        # a process that is going or not yet there.
        self.mu = threading.Lock()

    def start(self) -> None:
        self.log.write(f"=== soak: starting chronoqd at {time.time():.3f}\n".encode())
        self.log.flush()
        self.proc = subprocess.Popen(
            [self.binary, "--data", self.data, "--listen", f"127.0.0.1:{self.port}"],
            stdout=subprocess.PIPE, stderr=self.log, env=self.env,
        )
        # Wait for its "listening on" line, with a deadline that says what for.
        line: List[bytes] = []
        out = self.proc.stdout
        assert out is not None
        first_line = out.readline
        reader = threading.Thread(target=lambda: line.append(first_line()), daemon=True)
        reader.start()
        reader.join(120)
        if not line or b"listening on" not in line[0]:
            self.proc.kill()
            raise RuntimeError(
                f"gave up waiting for chronoqd's \"listening on\" line after 120 s (got {line!r})")
        # Keep draining stdout so that it can never block on a full pipe.
        threading.Thread(target=out.read, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc else 0

    def kill_and_restart(self) -> None:
        assert self.proc
        with self.mu:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=60)
            self.restarts += 1
            self.start()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 120) -> Optional[int]:
        if not self.proc:
            return None
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=60)
            return None


class Ledger:
    """What the driver knows about every task it made, one byte per task
    number (an hour at full load is under a million): compact and lock-free
    enough (bytearray item writes are atomic under the GIL)."""

    def __init__(self, capacity: int):
        self.next = itertools.count(1)
        self.kind = bytearray(capacity)      # ord('s'|'b'|'k'|'w')
        self.enq = bytearray(capacity)       # 1 sent, answer unknown; 2 acknowledged
        self.done = bytearray(capacity)      # successful acks (or deliveries), capped
        self.ack_lost = bytearray(capacity)  # an ack was sent and its answer lost
        self.failed = bytearray(capacity)    # failed once on purpose
        self.claimed = bytearray(capacity)   # claimed at least once (lateness once)

    def new(self, kind: str) -> int:
        n = next(self.next)
        if n >= len(self.kind):
            raise RuntimeError("ledger full: raise the capacity")
        self.kind[n] = ord(kind)
        return n

    def mark_done(self, n: int) -> None:
        if self.done[n] < 255:
            self.done[n] += 1


class Soak:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.out = args.out
        os.makedirs(self.out, exist_ok=True)
        self.data = os.path.join(self.out, "data")
        os.makedirs(self.data, exist_ok=True)
        self.load = args.load
        rate = 60 + 100 + 30 + 20
        self.ledger = Ledger(int(rate * self.load * (args.duration + 600) * 1.3) + 100_000)
        self.stop_producers = threading.Event()
        self.stop_workers = threading.Event()
        self.mu = threading.Lock()
        self.latencies: List[float] = []
        self.lateness: List[float] = []
        self.enqueued = 0
        self.acked = 0
        self.errors = 0
        self.counters: Dict[str, int] = {}
        self.unexpected: List[str] = []
        self.receiver_port = 0
        env = dict(os.environ)
        if args.sanitized:
            env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0"
        self.server = Server(args.chronoqd, self.data, free_port(),
                             os.path.join(self.out, "chronoqd.log"), env)
        self.url = f"http://127.0.0.1:{self.server.port}"
        self.client = Client(self.url, timeout=15.0)

    # --- requests ---------------------------------------------------------------

    def count(self, name: str, k: int = 1) -> None:
        with self.mu:
            self.counters[name] = self.counters.get(name, 0) + k

    def call(self, method: str, path: str, body: Any = None, *, timed: bool = True,
             extra_timeout: float = 0.0,
             expect: Tuple[str, ...] = ()) -> Tuple[Any, Optional[ChronoqError]]:
        """One request: (answer, None) or (None, error). Latency is kept for
        every exchange that got an answer, unless `timed` is False (long polls).
        An error whose code is neither in EXPECTED_CODES nor in `expect` counts
        as unexpected."""
        t0 = time.monotonic()
        try:
            answer = self.client.request(method, path, body, extra_timeout=extra_timeout)
            if timed:
                self.latencies.append((time.monotonic() - t0) * 1000.0)
            return answer, None
        except ChronoqError as e:
            if timed and e.status is not None:
                self.latencies.append((time.monotonic() - t0) * 1000.0)
            self.count("error." + e.code)
            if e.code not in EXPECTED_CODES and e.code not in expect:
                with self.mu:
                    self.errors += 1
                    if len(self.unexpected) < 50:
                        self.unexpected.append(f"{time.strftime('%H:%M:%S')} {method} {path}: {e}")
            elif isinstance(e, (ConnectionFailed, OutcomeUnknown)) or e.code == "unavailable":
                time.sleep(0.05)  # chronoqd is restarting: do not spin
            return None, e

    # --- producers ----------------------------------------------------------------

    def paced(self, per_second: float, step) -> None:
        """Calls step() per_second times a second until the producers stop."""
        if per_second <= 0:
            return
        period = 1.0 / per_second
        due = time.monotonic()
        while not self.stop_producers.is_set():
            step()
            due += period
            delay = due - time.monotonic()
            if delay > 0:
                self.stop_producers.wait(delay)
            elif delay < -5:
                due = time.monotonic()  # fell far behind (a restart): do not burst

    def spec(self, n: int, kind: str, queue: str, delayed: bool) -> Dict[str, Any]:
        body: Dict[str, Any] = {"queue": queue, "id": f"{kind}-{n}", "on_conflict": "ignore",
                                "payload": {"n": n}}
        if delayed:
            body["delay_ms"] = 100 + (n * 7919) % 2900
        return body

    def enqueue_until_acknowledged(self, path: str, body: Any, ns: List[int]) -> None:
        for n in ns:
            self.ledger.enq[n] = 1
        maybe_done = False  # an earlier sending lost its answer
        while True:
            answer, err = self.call("POST", path, body)
            if err is None:
                for n in ns:
                    self.ledger.enq[n] = 2
                with self.mu:
                    self.enqueued += len(ns)
                return
            if err.code == "key_backlog_full":
                self.count("key_backlog_full")
                if not maybe_done:
                    for n in ns:
                        self.ledger.enq[n] = 0  # refused: chronoq never had it
                return
            if err.code == "outcome_unknown":
                maybe_done = True
            if err.code not in ("connection_failed", "outcome_unknown", "unavailable"):
                return  # an unexpected error, already counted
            if self.stop_workers.is_set():
                return

    def single(self) -> None:
        def step() -> None:
            n = self.ledger.new("s")
            body = self.spec(n, "s", "soak.work", n % 2 == 0)
            self.enqueue_until_acknowledged("/v1/tasks", body, [n])
        self.paced(60 * self.load, step)

    def batch(self) -> None:
        def step() -> None:
            ns = [self.ledger.new("b") for _ in range(25)]
            tasks = [self.spec(n, "b", "soak.work", n % 5 == 0) for n in ns]
            self.enqueue_until_acknowledged("/v1/tasks/batch", {"tasks": tasks}, ns)
        self.paced(4 * self.load, step)

    def keyed(self) -> None:
        def step() -> None:
            n = self.ledger.new("k")
            body = self.spec(n, "k", "soak.keyed", False)
            body["key"] = f"key-{n % 16}"
            self.enqueue_until_acknowledged("/v1/tasks", body, [n])
        self.paced(30 * self.load, step)

    def hooks(self) -> None:
        url = f"http://127.0.0.1:{self.receiver_port}/hook"
        def step() -> None:
            n = self.ledger.new("w")
            body = self.spec(n, "w", "soak.hooks", n % 4 == 0)
            body["target"] = {"url": url, "timeout_ms": 5000}
            self.enqueue_until_acknowledged("/v1/tasks", body, [n])
        self.paced(20 * self.load, step)

    def locks(self) -> None:
        i = itertools.count()
        def step() -> None:
            k = next(i)
            key = f"soak-lock-{k % 8}"
            grant, err = self.call("POST", f"/v1/locks/{key}/acquire",
                                   {"wait_ms": 0, "lease_ms": 2000, "owner": "soak"})
            if err is not None:
                return
            self.count("locks.acquired")
            token = grant["token"]
            if k % 20 == 7:
                self.call("POST", f"/v1/locks/{key}/extend", {"token": token, "lease_ms": 2000})
            if k % 50 == 11:
                self.count("locks.abandoned")  # its lease lapses in 2 s
                return
            self.call("POST", f"/v1/locks/{key}/release", {"token": token})
        self.paced(20 * self.load, step)

    # --- workers ------------------------------------------------------------------

    def note_claim(self, task: Dict[str, Any], lateness: bool) -> Optional[int]:
        tid = task["id"]
        if len(tid) < 3 or tid[1] != "-" or tid[0] not in KINDS:
            return None
        n = int(tid[2:])
        if lateness and not self.ledger.claimed[n]:
            self.lateness.append(time.time() * 1000.0 - parse_time_ms(task["run_at"]))
        self.ledger.claimed[n] = 1
        return n

    def should_fail(self, n: int) -> bool:
        if n % 10 == 3 and not self.ledger.failed[n]:
            self.ledger.failed[n] = 1
            return True
        return False

    def record_ack(self, n: int, ok: bool, code: Optional[str]) -> None:
        if ok:
            self.ledger.mark_done(n)
            with self.mu:
                self.acked += 1
        elif code == "outcome_unknown":
            self.ledger.ack_lost[n] = 1

    def settle(self, outcomes: List[Dict[str, Any]], ns: Dict[str, int],
               results: Optional[List[Dict[str, Any]]], err: Optional[ChronoqError]) -> None:
        """Records what one call that carried `outcomes` (POST /v1/acks, or a
        claim's acks) did with each: its result, or, when the call failed,
        the answer lost for all."""
        if err is not None:
            for entry in outcomes:
                self.record_ack(ns[entry["id"]], False, err.code)
            return
        by_id = {e["id"]: e for e in outcomes}
        for r in results or []:
            if not r["ok"]:
                self.count("error." + r["error"]["code"])
            elif "error" not in by_id[r["id"]]:
                self.record_ack(ns[r["id"]], True, None)

    def worker(self, queue: str, mode: str) -> None:
        """mode: "single" (POST /ack, /fail), "batch" (POST /v1/acks) or
        "carried" (outcomes on the next claim)."""
        carried: List[Dict[str, Any]] = []
        carried_ns: Dict[str, int] = {}
        name = f"soak-{queue}-{mode}"
        while not self.stop_workers.is_set():
            body: Dict[str, Any] = {"max": 50, "lease_ms": 10000, "wait_ms": 500, "worker": name}
            if carried:
                body["acks"] = carried
            answer, err = self.call("POST", f"/v1/queues/{queue}/claim", body, timed=False,
                                    extra_timeout=0.5)
            if carried:
                self.settle(carried, carried_ns, answer and answer.get("acks", []), err)
                carried, carried_ns = [], {}
            if answer is None:
                continue
            outcomes: List[Dict[str, Any]] = []
            ns: Dict[str, int] = {}
            for task in answer["tasks"]:
                n = self.note_claim(task, lateness=(queue == "soak.work"))
                if n is None:
                    continue
                ns[task["id"]] = n
                entry: Dict[str, Any] = {"id": task["id"], "token": task["token"]}
                if self.should_fail(n):
                    entry.update(error="soak: failed once on purpose", retry_in_ms=200)
                    self.count("failed")
                outcomes.append(entry)
            if mode == "carried":
                carried, carried_ns = outcomes, ns
            elif mode == "batch" and outcomes:
                res, err = self.call("POST", "/v1/acks", {"acks": outcomes})
                self.settle(outcomes, ns, res and res["results"], err)
            else:
                for entry in outcomes:
                    n = ns[entry["id"]]
                    tid = entry.pop("id")
                    path = f"/v1/tasks/{tid}/" + ("fail" if "error" in entry else "ack")
                    _, err = self.call("POST", path, entry)
                    if "error" not in entry:
                        self.record_ack(n, err is None, err.code if err else None)

    def cron_worker(self) -> None:
        while not self.stop_workers.is_set():
            answer, err = self.call("POST", "/v1/queues/soak.cron/claim",
                                    {"max": 10, "lease_ms": 10000, "wait_ms": 500}, timed=False,
                                    extra_timeout=0.5)
            if answer is None:
                continue
            for task in answer["tasks"]:
                _, err = self.call("POST", f"/v1/tasks/{task['id']}/ack", {"token": task["token"]})
                if err is None:
                    self.count("cron.acked")

    # --- the receiver -------------------------------------------------------------

    def start_receiver(self) -> http.server.ThreadingHTTPServer:
        soak = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", "0"))
                try:
                    n = int(json.loads(self.rfile.read(length))["n"])
                    soak.ledger.mark_done(n)
                    soak.count("deliveries")
                except (ValueError, KeyError, TypeError):
                    soak.count("deliveries.malformed")
                self.send_response(204)
                self.end_headers()

            def log_message(self, *a: Any) -> None:
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        srv.daemon_threads = True
        self.receiver_port = srv.server_address[1]
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        return srv

    # --- sampling -----------------------------------------------------------------

    def proc_figures(self) -> Tuple[int, int, int]:
        pid = self.server.pid
        rss = fds = ticks = 0
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1])
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
                ticks = int(fields[11]) + int(fields[12])
        except (OSError, ValueError, IndexError):
            pass
        return rss, fds, ticks

    def wal_bytes(self) -> int:
        return sum(os.path.getsize(p) for p in glob.glob(os.path.join(self.data, "*-wal"))
                   if os.path.exists(p))

    def backlog(self, queues: List[str]) -> Optional[int]:
        """Scheduled and running tasks of `queues`; None when chronoqd did not answer."""
        answer, err = self.call("GET", "/v1/queues", timed=False)
        if answer is None:
            return None
        return sum(q["counts"]["scheduled"] + q["counts"]["running"]
                   for q in answer["queues"] if q["name"] in queues)

    def sampler(self, writer: Any, f: Any, t0: float) -> None:
        """Writes one row of samples.csv every SAMPLE_EVERY_S until the workers stop."""
        hz = os.sysconf("SC_CLK_TCK")
        k = 1
        last_pid, last_ticks = 0, 0
        last_cpu = resource.getrusage(resource.RUSAGE_SELF)
        last_t = time.monotonic()
        while not self.stop_workers.is_set():
            if self.stop_workers.wait(max(0.0, t0 + k * SAMPLE_EVERY_S - time.monotonic())):
                break
            k += 1
            now = time.monotonic()
            with self.mu:
                lat, self.latencies = self.latencies, []
                late, self.lateness = self.lateness, []
                enq, self.enqueued = self.enqueued, 0
                acked, self.acked = self.acked, 0
                errors, self.errors = self.errors, 0
            with self.server.mu:
                rss, fds, ticks = self.proc_figures()
                pid = self.server.pid
                restarts = self.server.restarts
                wal = self.wal_bytes()
            cpu = ((ticks - last_ticks) / hz / (now - last_t) * 100.0) if pid == last_pid else None
            last_pid, last_ticks = pid, ticks
            ru = resource.getrusage(resource.RUSAGE_SELF)
            dcpu = ((ru.ru_utime + ru.ru_stime - last_cpu.ru_utime - last_cpu.ru_stime)
                    / (now - last_t) * 100.0)
            last_cpu, last_t = ru, now
            fmt = lambda v: "" if v is None else f"{v:.2f}"  # noqa: E731
            row = [f"{now - t0:.1f}", pid, rss, fds, wal,
                   fmt(percentile(lat, 50)), fmt(percentile(lat, 99)), len(lat),
                   fmt(percentile(late, 50)), fmt(percentile(late, 99)), len(late),
                   enq, acked, "" if (b := self.backlog(QUEUES)) is None else b,
                   restarts, errors, fmt(cpu), fmt(dcpu), f"{os.getloadavg()[0]:.2f}"]
            writer.writerow(row)
            f.flush()
            if self.args.verbose:
                print(" ".join(f"{c}={v}" for c, v in zip(COLUMNS, row)), flush=True)

    # --- the run ------------------------------------------------------------------

    def setup(self) -> None:
        for q in QUEUES:
            body: Dict[str, Any] = {"retention_ms": 60000}
            if q == "soak.keyed":
                body.update(max_in_flight_per_key=1, max_pending_per_key=100)
            self.must("PUT", f"/v1/queues/{q}", body)
        for i in range(3):
            self.must("PUT", f"/v1/schedules/soak-cron-{i}",
                      {"queue": "soak.cron", "cron": "* * * * * *"})

    def must(self, method: str, path: str, body: Any = None) -> Any:
        answer, err = self.call(method, path, body, timed=False)
        if err is not None:
            raise RuntimeError(f"{method} {path}: {err}")
        return answer

    def drain(self, deadline_s: float) -> Tuple[bool, float]:
        """Waits until the queues the producers fed are empty and every
        acknowledged webhook task was delivered."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < deadline_s:
            if self.backlog(DRAIN_QUEUES) == 0:
                return True, time.monotonic() - t0
            time.sleep(1)
        return False, time.monotonic() - t0

    def verify(self) -> Dict[str, Any]:
        L = self.ledger
        top = next(L.next)
        tally: Dict[str, Dict[str, int]] = {}
        lost: List[str] = []
        for n in range(1, top):
            if not L.kind[n]:
                continue
            kind = chr(L.kind[n])
            t = tally.setdefault(KINDS[kind], {})
            def add(what: str) -> None:
                t[what] = t.get(what, 0) + 1
            if L.enq[n] == 0:
                add("refused")  # key_backlog_full, never acknowledged
                continue
            if L.enq[n] == 1:
                add("unacknowledged")  # the driver stopped before an answer came
                continue
            add("acknowledged")
            if L.done[n] >= 1:
                add("done")
                if L.done[n] > 1:
                    t["duplicates"] = t.get("duplicates", 0) + L.done[n] - 1
                continue
            task, err = self.call("GET", f"/v1/tasks/{kind}-{n}", timed=False,
                                  expect=("not_found",))
            if task is not None:
                add("present_" + task["state"])
                if task["state"] == "dead":
                    lost.append(f"{kind}-{n} (dead: {task.get('last_error')})")
            elif err is not None and err.code == "not_found" and L.ack_lost[n]:
                add("acked_answer_lost")
            else:
                add("lost")
                lost.append(f"{kind}-{n} ({err})")
        return {"by_kind": tally, "lost": lost[:100], "lost_count": len(lost)}

    def run(self) -> int:
        args = self.args
        self.start_receiver()
        self.server.start()
        self.setup()
        csv_path = os.path.join(self.out, "samples.csv")
        f = open(csv_path, "w", newline="")
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        f.flush()
        t0 = time.monotonic()
        started = time.time()
        sampler = threading.Thread(target=self.sampler, args=(writer, f, t0), daemon=True)
        sampler.start()
        producers = [threading.Thread(target=t, daemon=True)
                     for t in (self.single, self.batch, self.keyed, self.hooks, self.locks)]
        workers = [
            threading.Thread(target=self.worker, args=("soak.work", "single"), daemon=True),
            threading.Thread(target=self.worker, args=("soak.work", "batch"), daemon=True),
            threading.Thread(target=self.worker, args=("soak.keyed", "carried"), daemon=True),
            threading.Thread(target=self.cron_worker, daemon=True),
        ]
        for t in producers + workers:
            t.start()
        kill_times = []
        k = 1
        while True:
            now = time.monotonic() - t0
            if now >= args.duration:
                break
            next_kill = k * args.kill_every if args.kill_every > 0 else float("inf")
            # No kill in the last minute: the end state is a settled one.
            if next_kill < args.duration - 60 and now >= next_kill:
                k += 1
                before = time.monotonic()
                self.server.kill_and_restart()
                kill_times.append({"at_s": round(now, 1),
                                   "restart_s": round(time.monotonic() - before, 2)})
                print(f"soak: SIGKILL and restart at {now:.0f} s "
                      f"({kill_times[-1]['restart_s']} s to listen again)", flush=True)
                continue
            wait = min(args.duration, next_kill) - now
            time.sleep(max(0.05, min(wait, 1.0)))
        run_s = time.monotonic() - t0
        self.stop_producers.set()
        for t in producers:
            t.join(30)
        drained, drain_s = self.drain(240)
        self.stop_workers.set()
        for t in workers:
            t.join(30)
        sampler.join(30)
        f.close()
        verification = self.verify()
        cron = [self.call("GET", f"/v1/schedules/soak-cron-{i}", timed=False)[0] for i in range(3)]
        exit_code = self.server.stop(signal.SIGTERM)
        with open(os.path.join(self.out, "chronoqd.log"), "rb") as log:
            log_text = log.read().decode("utf-8", "replace")
        counts = {
            "started_utc": dt.datetime.fromtimestamp(started, dt.timezone.utc).isoformat(),
            "duration_s": args.duration,
            "run_s": round(run_s, 1),
            "kill_every_s": args.kill_every,
            "load": self.load,
            "sanitized": bool(args.sanitized),
            "chronoqd": os.path.abspath(args.chronoqd),
            "kills": kill_times,
            "restarts": self.server.restarts,
            "drained": drained,
            "drain_s": round(drain_s, 1),
            "counters": self.counters,
            "unexpected_errors": self.unexpected,
            "verification": verification,
            "schedule_runs": [c.get("runs") if c else None for c in cron],
            "sigterm_exit_code": exit_code,
            "log_sanitizer_reports": len(re.findall(
                r"ERROR: (LeakSanitizer|AddressSanitizer)|runtime error:", log_text)),
            "log_errors": len(re.findall(r"\[(error|critical)\]", log_text)),
            "machine": {"cores": os.cpu_count(), "load_avg_at_end": os.getloadavg()},
        }
        with open(os.path.join(self.out, "counts.json"), "w") as out:
            json.dump(counts, out, indent=1)
        print(f"soak: ran {run_s:.0f} s, {self.server.restarts} restarts; "
              f"lost {verification['lost_count']}; chronoqd exit {exit_code} on SIGTERM",
              flush=True)
        return subprocess.call([sys.executable, os.path.join(HERE, "verdict.py"), self.out])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--chronoqd", required=True)
    p.add_argument("--duration", type=parse_duration, default=parse_duration("10m"))
    p.add_argument("--kill-every", type=parse_duration, default=parse_duration("10m"),
                   help="SIGKILL and restart chronoqd this often; 0: never")
    p.add_argument("--load", type=float, default=1.0, help="scales every rate")
    p.add_argument("--sanitized", action="store_true",
                   help="chronoqd is an ASan build: LeakSanitizer on, its report checked at exit")
    p.add_argument("--out", required=True)
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()
    return Soak(args).run()


if __name__ == "__main__":
    sys.exit(main())
