"""A Python client at the boundary: one request, then one after each pause.

Usage: pauses.py CLIENT MODE URL PAUSE_S...
CLIENT is httpx, aiohttp, requests, urllib3 or libcurl (through ctypes, so
no build is needed); MODE is `advised` (the advice table's setting for a
safe value of 1,900 ms; requests, urllib3 and libcurl have none, so they
run as they are), `nopool` (its "do not pool" setting), or for libcurl
`seconds` (CURLOPT_MAXAGE_CONN=1, the whole-second rule's setting for a
3 s server). Prints `version V`, then `ok STATUS` or `error WHAT` per
request; exits 1 if any request failed. tests/advice_clients.rs reads the
server's /peers after.
"""

import asyncio
import ctypes
import ctypes.util
import sys
import time

SAFE_S = 1.9


def run_httpx(mode, url, pauses):
    import httpx

    print("version", httpx.__version__)
    if mode == "advised":
        limits = httpx.Limits(keepalive_expiry=SAFE_S)
    else:
        limits = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(limits=limits) as client:
        each(pauses, lambda: client.get(url).status_code)


def run_aiohttp(mode, url, pauses):
    import aiohttp

    print("version", aiohttp.__version__)

    async def main():
        if mode == "advised":
            connector = aiohttp.TCPConnector(keepalive_timeout=SAFE_S)
        else:
            connector = aiohttp.TCPConnector(force_close=True)
        async with aiohttp.ClientSession(connector=connector) as session:
            for pause in [None, *pauses]:
                if pause is not None:
                    await asyncio.sleep(pause)
                try:
                    async with session.get(url) as response:
                        await response.read()
                        report(f"ok {response.status}")
                except Exception as e:  # noqa: BLE001 - every failure is reported
                    report(f"error {e!r}")

    asyncio.run(main())


def run_requests(mode, url, pauses):
    import requests

    print("version", requests.__version__)
    with requests.Session() as session:
        if mode == "nopool":
            session.headers["Connection"] = "close"
        each(pauses, lambda: session.get(url).status_code)


def run_urllib3(mode, url, pauses):
    import urllib3

    print("version", urllib3.__version__)
    pool = urllib3.PoolManager(retries=False)
    headers = {"Connection": "close"} if mode == "nopool" else {}
    each(pauses, lambda: pool.request("GET", url, headers=headers).status)


CURLOPT_URL = 10002
CURLOPT_WRITEFUNCTION = 20011
CURLOPT_USERAGENT = 10018
CURLOPT_FORBID_REUSE = 75
CURLOPT_MAXAGE_CONN = 288
CURLINFO_RESPONSE_CODE = 0x200002
WRITE = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                         ctypes.c_size_t, ctypes.c_void_p)


def run_libcurl(mode, url, pauses):
    curl = ctypes.CDLL(ctypes.util.find_library("curl") or "libcurl.so.4")
    curl.curl_version.restype = ctypes.c_char_p
    curl.curl_easy_init.restype = ctypes.c_void_p
    curl.curl_easy_strerror.restype = ctypes.c_char_p
    version = curl.curl_version().decode()
    print("version", version)
    handle = ctypes.c_void_p(curl.curl_easy_init())
    # libcurl sends no User-Agent unless told; "libcurl/7.88.1" names it.
    curl.curl_easy_setopt(handle, CURLOPT_USERAGENT, version.split()[0].encode())
    discard = WRITE(lambda _data, size, count, _user: size * count)
    curl.curl_easy_setopt(handle, CURLOPT_URL, url.encode())
    curl.curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, discard)
    if mode == "seconds":
        # The least whole-second setting, 1: what the table tells a 3 s
        # server, never a 2 s one (it reuses connections idle ~1.99 s).
        curl.curl_easy_setopt(handle, CURLOPT_MAXAGE_CONN, ctypes.c_long(1))
    elif mode == "nopool":
        curl.curl_easy_setopt(handle, CURLOPT_FORBID_REUSE, ctypes.c_long(1))

    def one():
        code = curl.curl_easy_perform(handle)
        if code != 0:
            raise RuntimeError(curl.curl_easy_strerror(code).decode())
        status = ctypes.c_long()
        curl.curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, ctypes.byref(status))
        return status.value

    each(pauses, one)


failures = 0


def report(line):
    global failures
    failures += line.startswith("error")
    print(line, flush=True)


def each(pauses, request):
    for pause in [None, *pauses]:
        if pause is not None:
            time.sleep(pause)
        try:
            report(f"ok {request()}")
        except Exception as e:  # noqa: BLE001 - every failure is reported
            report(f"error {e!r}")


if __name__ == "__main__":
    client, mode, url, *pauses = sys.argv[1:]
    globals()["run_" + client](mode, url, [float(p) for p in pauses])
    sys.exit(1 if failures else 0)
