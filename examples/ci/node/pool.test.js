// A client that calls its upstream now and then, through one keep-alive
// http.Agent. Run under the keep-alive race guard:
//
//   keepalive-server lab --keep-alive-timeout 1s -- npm test
//
// The lab keeps an idle connection 2 s (1 s plus its grace) and, asked with
// ?advertise=none, does not say so in a Keep-Alive header: like nginx by
// default and most load balancers, so Node's agent cannot adapt to it. An
// agent that keeps idle sockets longer than the server does races it; the
// guard keeps the connection open past its deadline (its shadow deadline),
// serves the reuse after the 2.2 s pause, and reports the request as one
// production would have lost (`race`).
// AGENT_TIMEOUT_MS (default 500) sets the agent's idle timeout: 5000 is the
// misconfigured agent the guard catches.
'use strict';

const assert = require('node:assert');
const http = require('node:http');
const { setTimeout: sleep } = require('node:timers/promises');
const { test } = require('node:test');

const agentTimeoutMs = Number(process.env.AGENT_TIMEOUT_MS ?? 500);

function get(agent, url) {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode, body }));
      })
      .on('error', reject);
  });
}

test('calls spread out reuse only live connections', async (t) => {
  if (!process.env.KAS_LAB_URL) {
    t.skip('run under `keepalive-server lab -- npm test` (KAS_LAB_URL is unset)');
    return;
  }
  const url = new URL('?advertise=none', process.env.KAS_LAB_URL);
  const agent = new http.Agent({ keepAlive: true, timeout: agentTimeoutMs });
  try {
    for (const pause of [700, 2200]) {
      assert.equal((await get(agent, url)).body, 'Hello, World!');
      await sleep(pause);
    }
    assert.equal((await get(agent, url)).status, 200);
  } finally {
    agent.destroy();
  }
});
