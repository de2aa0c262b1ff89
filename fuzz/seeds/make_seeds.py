#!/usr/bin/env python3
"""Writes the seed corpora: session/ (settings byte, step count, steps, stream)
and parse_head/ (limits byte, split seed, request bytes)."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))

REQUESTS = {
    "get": b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    "head": b"HEAD / HTTP/1.1\r\nHost: a\r\n\r\n",
    "notfound": b"GET /nope HTTP/1.1\r\nHost: a\r\n\r\n",
    "http10_keepalive": b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    "http10": b"GET / HTTP/1.0\r\n\r\n",
    "post_length": b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
    "post_chunked": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5;ext=1\r\nhello\r\n3\r\nabc\r\n0\r\nTrailer: x\r\n\r\n",
    "expect": b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
    "delay": b"GET /delay/5 HTTP/1.1\r\nHost: a\r\n\r\n",
    "options": b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
    "later_minor": b"GET / HTTP/1.7\r\nHost: a\r\n\r\n",
    "close": b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    "absolute": b"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
    "bytes": b"GET /bytes/70000 HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
    "bytes_head": b"HEAD /bytes/100 HTTP/1.1\r\nHost: a\r\n\r\n",
}
BAD = {
    "no_host": b"GET / HTTP/1.1\r\n\r\n",
    "two_hosts": b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    "cl_te": b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
    "bad_cl": b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 2\r\n\r\n",
    "gzip": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
    "http2": b"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
    "expect_teapot": b"GET / HTTP/1.1\r\nHost: a\r\nExpect: teapot\r\n\r\n",
    "bad_chunk": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    "big_body": b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999\r\n\r\n",
    "garbage": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    "folded": b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
}


def write(directory, name, data):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def session_seed(stream, settings=0, steps=()):
    out = bytes([settings, len(steps)])
    for length, action in steps:
        out += bytes([length, action])
    return out + stream


session = os.path.join(HERE, "session")
head = os.path.join(HERE, "parse_head")
for name, req in {**REQUESTS, **BAD}.items():
    write(session, name, session_seed(req))
    write(head, name, bytes([0x10 if "chunk" in name else 0, 37]) + req)
pipeline = b"".join(REQUESTS[k] for k in ["get", "head", "post_chunked", "notfound",
                                           "post_length", "http10_keepalive", "delay",
                                           "get"])
write(session, "pipelined", session_seed(pipeline))
write(session, "pipelined_split", session_seed(
    pipeline, steps=[(7, 0), (30, 1), (1, 0), (64, 2), (90, 4), (200, 0)]))
write(session, "pipelined_limits", session_seed(pipeline, settings=0b0110_1010))
write(session, "expect_split", session_seed(REQUESTS["expect"], steps=[(72, 0), (3, 0)]))
write(session, "timeout_mid_head", session_seed(REQUESTS["get"], steps=[(10, 0x08), (10, 0x18)]))
write(session, "delay_then_more", session_seed(REQUESTS["delay"] + REQUESTS["close"] + REQUESTS["get"],
                                               steps=[(255, 0x01), (0, 0x04)]))
write(session, "bad_after_good", session_seed(REQUESTS["get"] + BAD["cl_te"] + REQUESTS["get"]))
write(session, "draining", session_seed(REQUESTS["get"] + REQUESTS["get"], steps=[], settings=0) [:1]
      + bytes([0x40]) + REQUESTS["get"] + REQUESTS["get"])
# Step-count bit 7: the stream sixteen times over (output past 64 KiB).
write(session, "pipelined_x16", bytes([0, 0x80 | 3, 200, 1, 200, 1, 200, 3]) + pipeline)
write(session, "tiny_gets_x16", bytes([0, 0x80]) + b"GET / HTTP/1.1\nHost: a\n\n" * 150)
