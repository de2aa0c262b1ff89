# The WSGI echo the forwarding tests put behind the lab (wsgiref, the
# standard library only): every request is answered with what reached it,
# as JSON: method, path (PATH_INFO), query, protocol, fields (lower-cased
# names; repeated ones joined by wsgiref with ","), body and its length.
# A chunked body is decoded here (wsgiref reads Content-Length only).
# `/until-close/N` answers N bytes with no Content-Length, ended by the
# close. An `Expect: 100-continue` is answered with a 100 carrying
# `X-Upstream-Continue: 1`, so a test can tell it from one the lab made.
# Prints the port it listens on, then serves (one request per connection,
# HTTP/1.0 answers, a thread each).
import json
import socketserver
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer


class Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class Handler(WSGIRequestHandler):
    # HTTP/1.1, so http.server answers Expect: 100-continue at all.
    protocol_version = "HTTP/1.1"

    def handle_expect_100(self):
        self.send_response_only(100)
        self.send_header("X-Upstream-Continue", "1")
        self.end_headers()
        return True

    def log_message(self, *args):
        pass


def read_body(environ):
    stream = environ["wsgi.input"]
    if environ.get("HTTP_TRANSFER_ENCODING", "").lower() == "chunked":
        body = b""
        while True:
            size = int(stream.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while stream.readline() not in (b"\r\n", b""):
                    pass
                return body
            body += stream.read(size)
            stream.readline()
    length = int(environ.get("CONTENT_LENGTH") or 0)
    return stream.read(length) if length else b""


def app(environ, start_response):
    path = environ["PATH_INFO"]
    body = read_body(environ)
    if path.startswith("/until-close/"):
        n = int(path.rsplit("/", 1)[1])
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        # A generator: wsgiref adds no Content-Length, the close ends it.
        return (b"u" * min(n - sent, 8192) for sent in range(0, n, 8192))
    fields = {
        name[5:].replace("_", "-").lower(): value
        for name, value in environ.items()
        if name.startswith("HTTP_")
    }
    for name in ("CONTENT_LENGTH", "CONTENT_TYPE"):
        if environ.get(name):
            fields[name.replace("_", "-").lower()] = environ[name]
    echo = {
        "method": environ["REQUEST_METHOD"],
        "path": path,
        "query": environ.get("QUERY_STRING", ""),
        "protocol": environ["SERVER_PROTOCOL"],
        "fields": fields,
        "body": body.decode("latin-1"),
        "body_len": len(body),
    }
    answer = json.dumps(echo).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("X-Echo", "1")])
    return [answer]


server = Server(("127.0.0.1", 0), Handler)
server.set_app(app)
print(server.server_address[1], flush=True)
server.serve_forever()
