"""The items service's client, as the rest of a code base would use it.

One pooled httpx.Client for the process: connections are kept open
between calls and reused. How long an idle one is kept is
KEEPALIVE_EXPIRY, and it must stay below the service's own idle timeout
(2 s, announced nowhere: no Keep-Alive header). It was 5 s, httpx's
default: a call made 2 to 5 s after the last one reuses a connection the
service may be closing at that moment, and fails with a
RemoteProtocolError ("Server disconnected without sending a response")
or a ConnectionResetError now and then. The guard
(`keepalive-server lab --upstream ...`) catches that in CI; 1 s is the fix.
"""

import os

import httpx

# Seconds the pool keeps an idle connection for reuse (httpx's
# keepalive_expiry): below the service's 2 s. KEEPALIVE_EXPIRY=5 brings
# back the bug.
KEEPALIVE_EXPIRY = float(os.environ.get("KEEPALIVE_EXPIRY", "1"))

# Where the service is; the suite points this at the guard's lab.
DEFAULT_URL = os.environ.get("ITEMS_URL", "http://127.0.0.1:8766")


class ItemsClient:
    """Calls the items service through one connection pool."""

    def __init__(self, base_url=DEFAULT_URL, keepalive_expiry=KEEPALIVE_EXPIRY):
        limits = httpx.Limits(keepalive_expiry=keepalive_expiry)
        self._http = httpx.Client(base_url=base_url, limits=limits, timeout=10)

    def create(self, name, price):
        """POST /items: 201 and the new item, or 422 with what was wrong."""
        return self._http.post("/items", json={"name": name, "price": price})

    def create_raw(self, payload):
        """POST /items with any JSON document, valid or not."""
        return self._http.post("/items", json=payload)

    def get(self, item_id):
        """GET /items/{id}: 200 and the item, or 404."""
        return self._http.get(f"/items/{item_id}")

    def list(self):
        """GET /items: 200 and every item."""
        return self._http.get("/items")

    def close(self):
        self._http.close()
