#!/usr/bin/env python3
"""What the admin listener and the dashboard cost, measured on this machine.

Starts the release server (--workers, default 2; keep-alive 600 s so nothing expires
during the run, admin on) and reports:

1. /healthz latency with 100 idle TCP clients on the admin port (connect to
   last byte, sequential probes): median, p99, max.
2. Wake-ups per second of the idle server (voluntary + nonvoluntary context
   switches summed over /proc/PID/task/*/status), with no viewer and with
   one dashboard viewer (/events at the default 250 ms).
3. Snapshot cost at N idle keep-alive connections: what each worker spent
   building its snapshot (`cost_us` in /timers), median over probes.
4. With --wrk: server CPU per request under wrk (one worker), with one
   viewer open vs none, in alternating rounds; medians and their ratio.
5. With --saturated ROUNDS: /metrics latency (connect to last byte, a
   fresh connection each, one probe every 20 ms) while wrk saturates the
   main listener (one worker, the whole server on CPU 0, wrk -t1 -c50 on
   CPU 1), this tree's binary and each --baseline alternating in every
   round; medians over the rounds of each round's median and p99. Only
   this measure runs when it is asked for.

Usage: scripts/admin-measure.py [--connections 10000] [--seconds 10] [--workers 2] [--wrk ROUNDS]
       scripts/admin-measure.py --saturated ROUNDS [--baseline PATH]... [--seconds 5]
Environment: HOST (127.0.0.1), PORT_BASE (18580): the servers listen on
PORT_BASE and PORT_BASE+1, their admin endpoints on PORT_BASE+10 and +11.
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target/release/keepalive-server")
HOST = os.environ.get("HOST", "127.0.0.1")
PORT_BASE = int(os.environ.get("PORT_BASE", "18580"))


def start_server(port, admin, workers, binary=BIN, cpu=None):
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    args = pin + [binary, "--listen", f"{HOST}:{port}", "--admin", f"{HOST}:{admin}",
            "--workers", str(workers), "--keep-alive-timeout", "600s"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection((HOST, admin), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("server did not start")


def http_get(port, path):
    s = socket.create_connection((HOST, port), timeout=10)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body


def context_switches(pid):
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/status") as f:
            for line in f:
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    total += int(line.split()[1])
    return total


def wakeups_per_second(pid, seconds):
    before = context_switches(pid)
    time.sleep(seconds)
    return (context_switches(pid) - before) / seconds


def cpu_seconds(pid, thread=None):
    """User + system CPU of the process, or of its thread named `thread`."""
    paths = [f"/proc/{pid}/stat"]
    if thread:
        paths = []
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/comm") as f:
                if f.read().strip() == thread:
                    paths.append(f"/proc/{pid}/task/{task}/stat")
    total = 0
    for path in paths:
        with open(path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


class Viewer:
    """One dashboard viewer: reads /events until stopped."""

    def __init__(self, admin):
        self.sock = socket.create_connection((HOST, admin), timeout=10)
        self.sock.sendall(b"GET /events HTTP/1.1\r\nHost: t\r\n\r\n")
        self.frames = 0
        self.running = True
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        while self.running:
            try:
                chunk = self.sock.recv(1 << 20)
            except OSError:
                return
            if not chunk:
                return
            self.frames += chunk.count(b"\ndata: ") + chunk.startswith(b"data: ")

    def close(self):
        self.running = False
        self.sock.close()


def idle_connections(port, n):
    conns = []
    for i in range(n):
        s = socket.create_connection((HOST, port), timeout=10)
        s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        got = b""
        while b"Hello, World!" not in got:
            got += s.recv(4096)
        conns.append(s)
    return conns


def quantile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--connections", type=int, default=10000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--wrk", type=int, default=0, help="rounds of the wrk comparison (0: skip)")
    parser.add_argument("--saturated", type=int, default=0,
                        help="rounds of /metrics latency under a saturated main listener (only this)")
    parser.add_argument("--baseline", action="append", default=[],
                        help="with --saturated: another keepalive-server binary to alternate with")
    opts = parser.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "keepalive-server"], cwd=ROOT, check=True)
    if opts.saturated:
        metrics_when_saturated(opts.saturated, [BIN] + opts.baseline, opts.seconds)
        return
    port, admin = PORT_BASE, PORT_BASE + 10
    proc = start_server(port, admin, opts.workers)
    try:
        idle_admin = [socket.create_connection((HOST, admin)) for _ in range(100)]
        time.sleep(0.2)
        took = []
        for _ in range(200):
            t = time.perf_counter()
            head, body = http_get(admin, "/healthz")
            took.append((time.perf_counter() - t) * 1000)
            assert head.startswith(b"HTTP/1.1 200") and body == b"ok\n"
        print(f"/healthz with 100 idle admin clients: median {statistics.median(took):.3f} ms, "
              f"p99 {quantile(took, 0.99):.3f} ms, max {max(took):.3f} ms (200 probes)")
        for s in idle_admin:
            s.close()
        time.sleep(1.5)  # the admin clients' request timers are gone with them

        print(f"idle, no viewer: {wakeups_per_second(proc.pid, opts.seconds):.2f} wake-ups/s over {opts.seconds:.0f} s")
        viewer = Viewer(admin)
        time.sleep(0.5)
        print(f"idle, one viewer (250 ms): {wakeups_per_second(proc.pid, opts.seconds):.2f} wake-ups/s over {opts.seconds:.0f} s")
        viewer.close()
        time.sleep(1.0)
        print(f"idle, viewer gone: {wakeups_per_second(proc.pid, opts.seconds):.2f} wake-ups/s over {opts.seconds:.0f} s")

        conns = idle_connections(port, opts.connections)
        time.sleep(0.5)
        costs = []
        for _ in range(21):
            _, body = http_get(admin, "/timers")
            view = json.loads(body)
            costs.append([w["cost_us"] for w in view["workers"]])
            time.sleep(0.05)
        lengths = [l["length"] for l in view["total"]["lists"] if l["label"] == "keep-alive"]
        per_worker = [statistics.median(c[i] for c in costs) for i in range(len(costs[0]))]
        print(f"snapshot at {opts.connections} idle connections (keep-alive list {lengths}): "
              f"median cost per worker {', '.join(f'{c:.0f} µs' for c in per_worker)} "
              f"(max seen {max(max(c) for c in costs)} µs); /timers {len(body)} bytes")
        print(f"idle with {opts.connections} connections, no viewer: "
              f"{wakeups_per_second(proc.pid, opts.seconds):.2f} wake-ups/s")
        for s in conns:
            s.close()
    finally:
        proc.kill()
        proc.wait()

    if opts.wrk:
        compare_under_wrk(opts.wrk)


def compare_under_wrk(rounds):
    port, admin = PORT_BASE + 1, PORT_BASE + 11
    proc = start_server(port, admin, 1)
    results = {(mode, scope): [] for mode in ("none", "viewer") for scope in ("process", "worker")}
    try:
        for r in range(rounds):
            for mode in (("none", "viewer") if r % 2 == 0 else ("viewer", "none")):
                viewer = Viewer(admin) if mode == "viewer" else None
                time.sleep(0.3)
                cpu = cpu_seconds(proc.pid), cpu_seconds(proc.pid, "worker-0")
                out = subprocess.run(["wrk", "-t1", "-c100", "-d5s", f"http://{HOST}:{port}/"],
                                     capture_output=True, text=True, check=True).stdout
                after = cpu_seconds(proc.pid), cpu_seconds(proc.pid, "worker-0")
                requests = int(re.search(r"(\d+) requests in", out).group(1))
                results[(mode, "process")].append((after[0] - cpu[0]) / requests * 1e6)
                results[(mode, "worker")].append((after[1] - cpu[1]) / requests * 1e6)
                if viewer:
                    viewer.close()
    finally:
        proc.kill()
        proc.wait()
    print(f"server CPU per request under wrk -t1 -c100 -d5s, one worker, {rounds} alternating rounds (medians):")
    for scope in ("process", "worker"):
        none = statistics.median(results[("none", scope)])
        viewer = statistics.median(results[("viewer", scope)])
        spread = lambda values: f"{min(values):.2f}-{max(values):.2f}"
        print(f"  {scope:8} no viewer {none:.2f} µs ({spread(results[('none', scope)])}), "
              f"one viewer {viewer:.2f} µs ({spread(results[('viewer', scope)])}); ratio {viewer / none:.3f}")


def metrics_when_saturated(rounds, binaries, seconds):
    """/metrics latency while wrk saturates the main listener, each binary
    in turn in every round (the order reversed every other round)."""
    port, admin = PORT_BASE + 2, PORT_BASE + 12
    medians = {b: [] for b in binaries}
    p99s = {b: [] for b in binaries}
    served = {b: [] for b in binaries}
    for r in range(rounds):
        for binary in (binaries if r % 2 == 0 else binaries[::-1]):
            proc = start_server(port, admin, 1, binary, cpu=0)
            try:
                load = subprocess.Popen(
                    ["taskset", "-c", "1", "wrk", "-t1", "-c50", f"-d{seconds + 2:.0f}s",
                     f"http://{HOST}:{port}/"], stdout=subprocess.PIPE, text=True)
                time.sleep(1)
                took = []
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    t = time.perf_counter()
                    head, body = http_get(admin, "/metrics")
                    took.append((time.perf_counter() - t) * 1000)
                    assert head.startswith(b"HTTP/1.1 200") and body, head
                    time.sleep(0.02)
                out = load.communicate()[0]
                served[binary].append(float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)))
                medians[binary].append(statistics.median(took))
                p99s[binary].append(quantile(took, 0.99))
            finally:
                proc.kill()
                proc.wait()
    print(f"/metrics under a saturated main listener (one worker, server on CPU 0, "
          f"wrk -t1 -c50 on CPU 1), {rounds} alternating rounds of {seconds:.0f} s, medians over rounds:")
    first = statistics.median(medians[binaries[0]])
    for binary in binaries:
        median = statistics.median(medians[binary])
        print(f"  {binary}: median {median:.3f} ms "
              f"({min(medians[binary]):.3f}-{max(medians[binary]):.3f}), "
              f"p99 {statistics.median(p99s[binary]):.3f} ms "
              f"({min(p99s[binary]):.3f}-{max(p99s[binary]):.3f}), "
              f"main listener {statistics.median(served[binary]):.0f} req/s; "
              f"this tree / it {first / median:.2f}x")


if __name__ == "__main__":
    main()
