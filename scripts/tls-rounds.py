#!/usr/bin/env python3
"""Memory across repeated attacks on the TLS port: the same attack made in
rounds on one server, its resident size sampled through each round.

  half-hellos  N connections each send half a ClientHello and then
               nothing: each handshake held waiting for the rest of its
               first record (default 10,000)
  handshakes   N connections each send a whole ClientHello and then
               nothing: each handshake held half done, waiting for the
               client's Finished (default 10,000)
  stalls       N connections complete a handshake and then send half of a
               16 KiB application-data record (default 500)

Each round opens the N connections, holds them for --hold seconds while
sampling the server's RSS from /proc, closes them all and waits until the
server's descriptors are back to where they began. Prints one line per
round: peak RSS, RSS after, descriptors after. A second round that costs
more than the first means what the first freed was not reused.

The server runs as scripts/faults.py starts it (two workers), with
--headers-timeout 120s so no round is cut short by the server.

Usage: scripts/tls-rounds.py SCENARIO [--bin PATH] [-n N] [--rounds R]
         [--hold S]
Needs openssl (for a throwaway certificate) and `ulimit -n` above N + 100.
BENCHMARKS.md ("TLS: 256 KiB answers, and stalls round after round") has
the figures.
"""

import argparse
import os
import selectors
import socket
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from faults import DEFAULT_BIN, Server  # noqa: E402


def make_cert(directory):
    cert = os.path.join(directory, "cert.pem")
    key = os.path.join(directory, "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", key, "-out", cert],
        check=True, capture_output=True,
    )
    return cert, key


def client_context():
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    return context


def client_hello(context):
    """A fresh ClientHello's bytes (its own random and key share)."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def open_handshakes(addr, n, context, part=1.0):
    """n connections, each having sent `part` of a ClientHello and nothing more."""
    socks = []
    for _ in range(n):
        sock = socket.create_connection(addr)
        hello = client_hello(context)
        sock.sendall(hello[: int(len(hello) * part)])
        socks.append(sock)
    return socks


def open_half_hellos(addr, n, context):
    """n connections, each having sent half a ClientHello."""
    return open_handshakes(addr, n, context, 0.5)


def handshake_over(sock, context):
    """Completes a TLS 1.3 handshake over a blocking socket through memory
    BIOs, so the records that follow can be sent byte by byte."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    while True:
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            sock.sendall(outgoing.read())
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("server closed during the handshake")
            incoming.write(data)
    sock.sendall(outgoing.read())
    return tls, outgoing


def open_stalls(addr, n, context):
    """n connections, each with a completed handshake and then half of one
    16 KiB application-data record sent."""
    socks = []
    for _ in range(n):
        sock = socket.create_connection(addr)
        tls, outgoing = handshake_over(sock, context)
        tls.write(b"x" * 16384)
        record = outgoing.read()
        sock.sendall(record[: len(record) // 2])
        socks.append(sock)
    return socks


def drain(socks, seconds):
    """Reads and drops what the server sends for `seconds` (its handshake
    flights, tickets), so its send side never blocks on us."""
    selector = selectors.DefaultSelector()
    for sock in socks:
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
    deadline = time.time() + seconds
    while time.time() < deadline:
        for key, _ in selector.select(timeout=0.05):
            try:
                if not key.fileobj.recv(65536):
                    selector.unregister(key.fileobj)
            except OSError:
                selector.unregister(key.fileobj)
    selector.close()


def one_round(server, scenario, n, hold, context, base_fds):
    start = time.time()
    opener = {"handshakes": open_handshakes, "half-hellos": open_half_hellos, "stalls": open_stalls}[scenario]
    peak = server.rss_mb()
    socks = []
    batch = 500
    while len(socks) < n:
        socks += opener(server.addr, min(batch, n - len(socks)), context)
        peak = max(peak, server.rss_mb())
    opened = time.time() - start
    held_until = time.time() + hold
    while time.time() < held_until:
        drain(socks, 0.2)
        peak = max(peak, server.rss_mb())
    open_fds = server.fds()
    for sock in socks:
        sock.close()
    deadline = time.time() + 30
    while server.fds() > base_fds and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    return peak, server.rss_mb(), open_fds, server.fds(), opened


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario", choices=["handshakes", "half-hellos", "stalls"])
    parser.add_argument("--bin", default=DEFAULT_BIN)
    parser.add_argument("-n", type=int, default=None, help="connections per round (10,000 or 500)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--hold", type=float, default=2.0, help="seconds each round is held")
    args = parser.parse_args()
    n = args.n or (500 if args.scenario == "stalls" else 10_000)
    context = client_context()
    with tempfile.TemporaryDirectory() as directory:
        cert, key = make_cert(directory)
        server = Server(args.bin, "--tls-cert", cert, "--tls-key", key, "--headers-timeout", "120s",
                        "--max-connections", str(n + 1000))
        try:
            base_fds = server.fds()
            print(f"{args.scenario}: {n} connections x {args.rounds} rounds, {os.path.basename(args.bin)}; "
                  f"RSS at start {server.rss_mb():.1f} MB, {base_fds} fds")
            for round_no in range(1, args.rounds + 1):
                peak, after, open_fds, fds, opened = one_round(server, args.scenario, n, args.hold, context, base_fds)
                print(f"  round {round_no}: peak {peak:.1f} MB, after {after:.1f} MB; "
                      f"fds {open_fds} open, {fds} after; opened in {opened:.1f} s", flush=True)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
