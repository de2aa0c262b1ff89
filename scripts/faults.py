#!/usr/bin/env python3
"""Fault probes: what unlucky or hostile clients do to the server, measured.

Each scenario starts the release binary (or --bin) on a free loopback port,
drives it with raw sockets and prints figures read from the client side and
from the server's /proc entry (open descriptors, resident memory):

  resets      N clients send a large POST in one burst and reset (SO_LINGER 0);
              connections (fds) left one second later
  flood       one client loops that for S seconds while a probe sends
              GET / every 100 ms; probes answered / sent, peak fds and RSS
  halfclose   a 100,000-byte POST, and 100 pipelined 1 KB POSTs, each
              followed by shutdown(SHUT_WR): delay from the last response
              byte to the server's FIN
  truncation  pipelined 1 MB echoes, the last with Connection: close, read
              at 200 KB/s; and one 20 MB echo with Connection: close read at
              full speed: bytes received / expected
  sigterm     6 pipelined 1 MB echoes read at 300 KB/s, SIGTERM at 3 s:
              complete responses, and whether the end was FIN or RST
  partial     N connections each send 900 KB of a 1 MB POST while reading
              whatever comes back; server RSS at the peak and after they leave
  all         every scenario above, in that order

Usage: scripts/faults.py SCENARIO [--bin PATH] [-n N] [--seconds S]
"""

import argparse
import os
import re
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BIN = os.path.join(ROOT, "target", "release", "keepalive-server")


class Server:
    """The binary under test, started on 127.0.0.1:0 with extra flags."""

    def __init__(self, binary, *flags):
        self.proc = subprocess.Popen(
            [binary, "--listen", "127.0.0.1:0", "--workers", "2", *flags],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "NO_COLOR": "1", "RUST_LOG": "info"},
        )
        self.log = []
        self.port = None
        deadline = time.time() + 20
        while self.port is None and time.time() < deadline:
            line = self.proc.stdout.readline().decode(errors="replace")
            if not line:
                break
            self.log.append(line)
            match = re.search(r"127\.0\.0\.1:(\d+)", line)
            if match and "listening" in line:
                self.port = int(match.group(1))
        if self.port is None:
            self.proc.kill()
            sys.exit("server did not start: " + "".join(self.log))
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stdout:
            self.log.append(line.decode(errors="replace"))

    @property
    def addr(self):
        return ("127.0.0.1", self.port)

    def fds(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def rss_mb(self):
        with open(f"/proc/{self.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def post_head(length, close=False, path="/"):
    connection = "Connection: close\r\n" if close else ""
    return (
        f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {length}\r\n{connection}\r\n"
    ).encode()


def reset(sock):
    """Closes with SO_LINGER 0: the kernel sends RST, not FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def burst_and_reset(addr, size=200_000):
    """Sends a POST head and `size` body bytes of a 1,000,000-byte body at
    once (as much as the socket takes without blocking), then resets."""
    sock = socket.create_connection(addr)
    sock.setblocking(False)
    try:
        sock.send(post_head(1_000_000) + b"x" * size)
    except BlockingIOError:
        pass
    reset(sock)


def settle(server, baseline, timeout):
    """Waits up to `timeout` s for the server's fds to return to `baseline`;
    returns how many are left over."""
    deadline = time.time() + timeout
    while time.time() < deadline and server.fds() > baseline:
        time.sleep(0.01)
    return server.fds() - baseline


def scenario_resets(binary, n):
    server = Server(binary)
    try:
        baseline = server.fds()
        rss0 = server.rss_mb()
        for _ in range(n):
            burst_and_reset(server.addr)
        peak_rss = server.rss_mb()
        left = settle(server, baseline, 1.0)
        print(
            f"resets: {n} reset clients -> {left} connections left after 1 s "
            f"(RSS {rss0:.1f} -> {peak_rss:.1f} MB)"
        )
    finally:
        server.stop()


def probe(addr, timeout=1.0):
    """One GET / on a fresh connection; True if a 200 came back in time."""
    try:
        with socket.create_connection(addr, timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
            return data.startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def scenario_flood(binary, seconds):
    server = Server(binary)
    try:
        baseline = server.fds()
        stop = time.time() + seconds
        flooded = [0]

        def flood():
            while time.time() < stop:
                try:
                    burst_and_reset(server.addr, 1_000_000)
                    flooded[0] += 1
                except OSError:
                    time.sleep(0.001)

        thread = threading.Thread(target=flood)
        thread.start()
        sent = answered = 0
        peak_fds = peak_rss = 0
        while time.time() < stop:
            started = time.time()
            sent += 1
            answered += probe(server.addr)
            peak_fds = max(peak_fds, server.fds() - baseline)
            peak_rss = max(peak_rss, server.rss_mb())
            time.sleep(max(0.0, 0.1 - (time.time() - started)))
        thread.join()
        left = settle(server, baseline, 1.0)
        print(
            f"flood: {seconds} s of reset clients ({flooded[0]} connections): probes "
            f"answered {answered}/{sent}; peak extra fds {peak_fds}, peak RSS "
            f"{peak_rss:.1f} MB; {left} connections left 1 s after"
        )
    finally:
        server.stop()


def read_responses(sock, count, deadline):
    """Reads `count` responses with Content-Length bodies; returns the time
    the last byte arrived and the leftover bytes."""
    data = b""
    got = 0
    last = time.time()
    while got < count and time.time() < deadline:
        head_end = data.find(b"\r\n\r\n")
        if head_end >= 0:
            match = re.search(rb"Content-Length: (\d+)", data[:head_end])
            length = int(match.group(1)) if match else 0
            if len(data) >= head_end + 4 + length:
                data = data[head_end + 4 + length :]
                got += 1
                continue
        chunk = sock.recv(65536)
        if not chunk:
            break
        last = time.time()
        data += chunk
    return got, last, data


def fin_delay(server, payload, responses):
    sock = socket.create_connection(server.addr)
    sock.settimeout(120)
    # The bytes and the FIN land together, so the hangup comes with the
    # event that carries them (the case a server must not lose).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
    sock.sendall(payload)
    sock.shutdown(socket.SHUT_WR)
    got, last, rest = read_responses(sock, responses, time.time() + 120)
    try:
        tail = sock.recv(1)
    except OSError:
        tail = b"?"
    fin = time.time()
    sock.close()
    if got != responses or tail:
        return f"{got}/{responses} responses, then {tail!r}"
    return f"FIN {1000 * (fin - last):.1f} ms after the last response"


def scenario_halfclose(binary):
    server = Server(binary)
    try:
        big = post_head(100_000) + b"x" * 100_000
        print(f"halfclose: 100,000-byte POST + SHUT_WR: {fin_delay(server, big, 1)}")
        small = (post_head(1000) + b"y" * 1000) * 100
        print(f"halfclose: 100 pipelined 1 KB POSTs + SHUT_WR: {fin_delay(server, small, 100)}")
    finally:
        server.stop()


def slow_read(sock, rate, deadline):
    """Reads until EOF/reset at about `rate` bytes/s; returns bytes and how
    the stream ended."""
    data = bytearray()
    started = time.time()
    ending = "timeout"
    while time.time() < deadline:
        try:
            chunk = sock.recv(16384)
        except ConnectionResetError:
            ending = "RST"
            break
        except socket.timeout:
            continue
        if not chunk:
            ending = "FIN"
            break
        data += chunk
        if rate:
            ahead = len(data) / rate - (time.time() - started)
            if ahead > 0:
                time.sleep(ahead)
    return bytes(data), ending


def slow_reader(addr):
    """A connection with a small receive buffer, so what the server sends
    waits in the server rather than in the kernel (as on a real network)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    sock.connect(addr)
    sock.settimeout(1)
    return sock


def send_in_background(sock, payload):
    thread = threading.Thread(target=lambda: _send_quietly(sock, payload), daemon=True)
    thread.start()
    return thread


def _send_quietly(sock, payload):
    """Sends all of `payload`, waiting out the socket's read timeout while
    the server applies backpressure; stops at a reset or close."""
    view = memoryview(payload)
    while view:
        try:
            view = view[sock.send(view[:262144]) :]
        except socket.timeout:
            continue
        except OSError:
            return


def complete_responses(data):
    """Counts whole responses (Content-Length framed) in `data`; returns the
    count and the bytes of an unfinished one."""
    count = 0
    while True:
        head_end = data.find(b"\r\n\r\n")
        if head_end < 0:
            return count, len(data)
        match = re.search(rb"Content-Length: (\d+)", data[:head_end])
        length = int(match.group(1)) if match else 0
        if len(data) < head_end + 4 + length:
            return count, len(data)
        data = data[head_end + 4 + length :]
        count += 1


def scenario_truncation(binary):
    server = Server(binary)
    try:
        body = b"z" * 1_000_000
        count = 3
        payload = b"".join(
            post_head(len(body), close=(i == count - 1)) + body for i in range(count)
        )
        sock = slow_reader(server.addr)
        send_in_background(sock, payload)
        data, ending = slow_read(sock, 200_000, time.time() + 60)
        whole, _ = complete_responses(data)
        expected = count * len(body)
        received = data.count(b"z")
        print(
            f"truncation: {count} pipelined 1 MB echoes, last Connection: close, read at "
            f"200 KB/s: body bytes {received}/{expected}, {whole}/{count} responses whole, "
            f"ended by {ending}"
        )
    finally:
        server.stop()
    server = Server(binary, "--max-body-size", "64MiB")
    try:
        size = 20_000_000
        for rate, how in ((0, "full speed"), (5_000_000, "read at 5 MB/s")):
            sock = slow_reader(server.addr)
            send_in_background(sock, post_head(size, close=True) + b"w" * size)
            data, ending = slow_read(sock, rate, time.time() + 60)
            print(
                f"truncation: one 20 MB echo, Connection: close, {how}: body bytes "
                f"{data.count(b'w')}/{size}, ended by {ending}"
            )
    finally:
        server.stop()


def scenario_sigterm(binary):
    server = Server(binary)
    try:
        body = b"s" * 1_000_000
        count = 6
        payload = (post_head(len(body)) + body) * count
        sock = slow_reader(server.addr)
        send_in_background(sock, payload)
        timer = threading.Timer(3.0, lambda: server.proc.send_signal(signal.SIGTERM))
        timer.start()
        data, ending = slow_read(sock, 300_000, time.time() + 60)
        timer.join()
        whole, partial = complete_responses(data)
        server.proc.wait(timeout=40)
        cut = [line.strip() for line in server.log if "cutting" in line]
        print(
            f"sigterm: {count} pipelined 1 MB echoes at 300 KB/s, SIGTERM at 3 s: {whole} "
            f"whole responses, {partial} bytes of an unfinished one, ended by {ending}; "
            f"'cutting' logged: {len(cut)}"
        )
    finally:
        server.stop()


def scenario_partial(binary, n, rounds=3):
    server = Server(binary)
    try:
        rss0 = server.rss_mb()
        peaks = []
        afters = []
        for _ in range(rounds):
            peak = partial_round(server, n)
            peaks.append(peak)
            time.sleep(2)
            afters.append(server.rss_mb())
        print(
            f"partial: {n} connections x 900 KB of a 1 MB POST, {rounds} rounds: RSS baseline "
            f"{rss0:.1f} MB, peak {max(peaks):.1f} MB, after each round "
            + ", ".join(f"{a:.1f}" for a in afters)
            + " MB"
        )
    finally:
        server.stop()


def partial_round(server, n):
    """Opens n connections, sends 900 KB of a 1 MB body on each (reading
    whatever the server sends back), samples RSS, then closes them all."""
    selector = selectors.DefaultSelector()
    chunk = b"p" * 65536
    socks = []
    for _ in range(n):
        sock = socket.create_connection(server.addr)
        sock.setblocking(False)
        socks.append(sock)
        selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, [post_head(1_000_000), 900_000])
    peak = 0.0
    pending = n
    last_sample = 0.0
    deadline = time.time() + 120
    while pending and time.time() < deadline:
        for key, events in selector.select(timeout=0.1):
            sock, state = key.fileobj, key.data
            if events & selectors.EVENT_READ:
                try:
                    sock.recv(262144)
                except OSError:
                    pass
            if events & selectors.EVENT_WRITE and state[1] > 0:
                out = state[0] or chunk[: min(len(chunk), state[1])]
                try:
                    sent = sock.send(out)
                except BlockingIOError:
                    continue
                except OSError:
                    state[1] = 0
                    sent = 0
                if state[0]:
                    state[0] = state[0][sent:]
                else:
                    state[1] -= sent
                if state[1] <= 0 and not state[0]:
                    selector.modify(sock, selectors.EVENT_READ, state)
                    pending -= 1
        if time.time() - last_sample > 0.2:
            peak = max(peak, server.rss_mb())
            last_sample = time.time()
    time.sleep(0.5)
    peak = max(peak, server.rss_mb())
    for sock in socks:
        selector.unregister(sock)
        sock.close()
    return peak


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario", choices=["resets", "flood", "halfclose", "truncation", "sigterm", "partial", "all"])
    parser.add_argument("--bin", default=DEFAULT_BIN)
    parser.add_argument("-n", type=int, default=None, help="clients (resets: 300, partial: 2000)")
    parser.add_argument("--seconds", type=float, default=10, help="flood length")
    args = parser.parse_args()
    run = {
        "resets": lambda: scenario_resets(args.bin, args.n or 300),
        "flood": lambda: scenario_flood(args.bin, args.seconds),
        "halfclose": lambda: scenario_halfclose(args.bin),
        "truncation": lambda: scenario_truncation(args.bin),
        "sigterm": lambda: scenario_sigterm(args.bin),
        "partial": lambda: scenario_partial(args.bin, args.n or 2000),
    }
    for name, scenario in run.items():
        if args.scenario in (name, "all"):
            scenario()


if __name__ == "__main__":
    main()
