"""A small JSON API on the Python standard library: the service under test.

    python service.py --port 8766

GET /items lists the items, POST /items creates one (422 when the body is
not a JSON object with a non-empty string "name" and a number "price" of 0
or more), GET /items/{id} answers one item or 404.

It keeps idle connections the way gunicorn does by default: HTTP/1.1
keep-alive, closed after 2 s without a request, and no Keep-Alive header
to say so. A client pool that keeps idle connections longer than that
races the close.
"""

import argparse
import json
import re
import threading
from urllib.parse import urlsplit
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Seconds an idle keep-alive connection is kept (gunicorn's default
# `keepalive = 2`); the handler's socket timeout is what closes it.
IDLE_TIMEOUT = 2
MAX_BODY = 64 * 1024


class Store:
    """The items, in memory, safe to use from the server's threads."""

    def __init__(self):
        self._lock = threading.Lock()
        self._items = {}
        self._next_id = 1

    def add(self, name, price):
        with self._lock:
            item = {"id": self._next_id, "name": name, "price": price}
            self._items[item["id"]] = item
            self._next_id += 1
            return item

    def get(self, item_id):
        with self._lock:
            return self._items.get(item_id)

    def all(self):
        with self._lock:
            return list(self._items.values())


def validate(payload):
    """The errors in a new item's payload, one per field, FastAPI-style."""
    if not isinstance(payload, dict):
        return [{"loc": ["body"], "msg": "expected a JSON object"}]
    errors = []
    name = payload.get("name")
    if not isinstance(name, str) or not name.strip():
        errors.append({"loc": ["body", "name"], "msg": "a non-empty string is required"})
    price = payload.get("price")
    if isinstance(price, bool) or not isinstance(price, (int, float)) or price < 0:
        errors.append({"loc": ["body", "price"], "msg": "a number of 0 or more is required"})
    return errors


class ItemsHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT
    # TCP_NODELAY, as production servers set it: the head and the body
    # are two writes, and Nagle would hold the body for the client's ACK.
    disable_nagle_algorithm = True
    server_version = "items-service/1.0"
    store = Store()

    def do_GET(self):
        path = urlsplit(self.path).path
        if path == "/items":
            self.answer(200, {"items": self.store.all()})
            return
        match = re.fullmatch(r"/items/(\d+)", path)
        if match is None:
            self.answer(404, {"detail": f"no route {path}"})
            return
        item = self.store.get(int(match.group(1)))
        if item is None:
            self.answer(404, {"detail": f"item {match.group(1)} not found"})
        else:
            self.answer(200, item)

    def do_POST(self):
        path = urlsplit(self.path).path
        if path != "/items":
            self.answer(404, {"detail": f"no route {path}"})
            return
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self.answer(411, {"detail": "a Content-Length is required"})
            return
        if int(length) > MAX_BODY:
            self.answer(413, {"detail": f"the body is over {MAX_BODY} bytes"})
            return
        body = self.rfile.read(int(length))
        try:
            payload = json.loads(body)
        except ValueError:
            self.answer(422, {"detail": [{"loc": ["body"], "msg": "not valid JSON"}]})
            return
        errors = validate(payload)
        if errors:
            self.answer(422, {"detail": errors})
            return
        item = self.store.add(payload["name"].strip(), payload["price"])
        self.answer(201, item, location=f"/items/{item['id']}")

    def version_string(self):
        return self.server_version

    def answer(self, status, document, location=None):
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if location is not None:
            self.send_header("Location", location)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):
        if self.server.verbose:
            super().log_message(format, *args)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), ItemsHandler)
    server.verbose = args.verbose
    print(f"items service on http://{args.host}:{server.server_port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
