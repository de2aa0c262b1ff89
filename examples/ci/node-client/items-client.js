// The items service's client, as the rest of a Node code base would use
// it: one keep-alive http.Agent for the process, so connections are kept
// open between calls and reused.
//
// How long the agent keeps an idle socket is its `timeout`,
// AGENT_TIMEOUT_MS here, and it must stay below the service's own idle
// timeout: 2 s, announced nowhere (no Keep-Alive header, so the agent
// cannot adapt to it as it does to a `Keep-Alive: timeout=N`). 5000 brings
// back the bug: a call made 2 to 5 s after the last one reuses a socket the
// service may be closing at that moment, and fails with ECONNRESET or
// "socket hang up" now and then. 1000 is the fix.
'use strict';

const http = require('node:http');

const AGENT_TIMEOUT_MS = Number(process.env.AGENT_TIMEOUT_MS ?? 1000);

class ItemsClient {
  constructor(baseUrl = process.env.ITEMS_URL ?? 'http://127.0.0.1:8766') {
    this.baseUrl = baseUrl;
    this.agent = new http.Agent({ keepAlive: true, timeout: AGENT_TIMEOUT_MS });
  }

  // POST /items: 201 and the new item, or 422 with what was wrong.
  create(name, price) {
    return this.request('POST', '/items', { name, price });
  }

  // POST /items with any JSON document, valid or not.
  createRaw(payload) {
    return this.request('POST', '/items', payload);
  }

  // GET /items/{id}: 200 and the item, or 404.
  get(id) {
    return this.request('GET', `/items/${id}`);
  }

  // GET /items: 200 and every item.
  list() {
    return this.request('GET', '/items');
  }

  close() {
    this.agent.destroy();
  }

  // One call: { status, headers, json }.
  request(method, path, payload) {
    const body = payload === undefined ? undefined : JSON.stringify(payload);
    const headers = { Accept: 'application/json' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = Buffer.byteLength(body);
    }
    const url = new URL(path, this.baseUrl);
    return new Promise((resolve, reject) => {
      const req = http.request(url, { method, headers, agent: this.agent }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (text += chunk));
        res.on('end', () => {
          try {
            resolve({ status: res.statusCode, headers: res.headers, json: JSON.parse(text) });
          } catch (error) {
            reject(error);
          }
        });
      });
      req.on('error', reject);
      req.end(body);
    });
  }
}

module.exports = { ItemsClient, AGENT_TIMEOUT_MS };
