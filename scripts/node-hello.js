// Node's own HTTP server, for scripts/loadtest.sh: `http.createServer`
// answering `Hello, World!` (text/plain) like keepalive-server's `/`, and
// `/bytes/<n>` with n bytes, with the same timeouts as keepalive-server's
// defaults (keep-alive 65 s, headers 60 s, request 300 s). One process,
// one event loop: what this server's timer design comes from.
//
// Usage: node scripts/node-hello.js [port]   (default 18460)
'use strict';
const http = require('node:http');

const port = Number(process.argv[2] || 18460);
const hello = Buffer.from('Hello, World!');
const sizes = new Map(); // n -> a Buffer of n bytes, made once

const server = http.createServer((req, res) => {
  let body = hello;
  let type = 'text/plain';
  const bytes = /^\/bytes\/(\d{1,9})$/.exec(req.url);
  if (bytes) {
    const n = Number(bytes[1]);
    if (!sizes.has(n)) sizes.set(n, Buffer.alloc(n, 'x'));
    body = sizes.get(n);
    type = 'application/octet-stream';
  }
  res.writeHead(200, { 'Content-Type': type, 'Content-Length': body.length });
  res.end(body);
});
server.keepAliveTimeout = 65_000;
server.headersTimeout = 60_000;
server.requestTimeout = 300_000;
server.listen(port, '127.0.0.1');
