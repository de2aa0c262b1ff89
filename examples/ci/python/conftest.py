"""Run these tests under the keep-alive race guard:

    keepalive-server lab --keep-alive-timeout 1s -- pytest

The guard starts a server, gives its URL in KAS_LAB_URL, and fails the run
when the pool below keeps idle connections as long as the server does.
KEEPALIVE_EXPIRY (seconds, default 0.5) sets the pool's httpx
keepalive_expiry: 5 is the misconfigured pool the guard catches.
"""

import os

import httpx
import pytest


@pytest.fixture
def lab_url():
    url = os.environ.get("KAS_LAB_URL")
    if not url:
        pytest.skip("run under `keepalive-server lab -- pytest` (KAS_LAB_URL is unset)")
    return url


@pytest.fixture
def client():
    expiry = float(os.environ.get("KEEPALIVE_EXPIRY", "0.5"))
    with httpx.Client(limits=httpx.Limits(keepalive_expiry=expiry)) as pooled:
        yield pooled
