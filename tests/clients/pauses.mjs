// A Node client at the boundary: one request, then one after each pause.
//
// Usage: node pauses.mjs CLIENT MODE URL PAUSE_S...
// CLIENT is agent (Node's http.Agent), agentkeepalive, axios, undici or
// fetch (Node's own, undici inside); MODE is `advised` (the advice table's
// setting for a safe value of 1,900 ms) or `nopool` (its "do not pool"
// setting). Prints `version V`, then `ok STATUS` or `error WHAT` per
// request; exits 1 if any failed.

import http from 'node:http';
import { createRequire } from 'node:module';

const SAFE_MS = 1900;
const [client, mode, url, ...pauses] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const advised = mode === 'advised';

/** GET `url` through a Node http.Agent, resolving to the status. */
function viaAgent(agent) {
  return () =>
    new Promise((resolve, reject) => {
      http.get(url, { agent }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode));
      }).on('error', reject);
    });
}

async function makeClient() {
  switch (client) {
    case 'agent':
      console.log('version', process.version);
      return viaAgent(
        advised ? new http.Agent({ keepAlive: true, timeout: SAFE_MS }) : new http.Agent({ keepAlive: false }),
      );
    case 'agentkeepalive': {
      const { default: Agent } = await import('agentkeepalive');
      console.log('version', require('agentkeepalive/package.json').version);
      return viaAgent(advised ? new Agent({ freeSocketTimeout: SAFE_MS }) : new Agent({ keepAlive: false }));
    }
    case 'axios': {
      const { default: axios } = await import('axios');
      console.log('version', axios.VERSION);
      const httpAgent = advised
        ? new http.Agent({ keepAlive: true, timeout: SAFE_MS })
        : new http.Agent({ keepAlive: false });
      const instance = axios.create({ httpAgent });
      return async () => (await instance.get(url)).status;
    }
    case 'undici': {
      const undici = await import('undici');
      console.log('version', require('undici/package.json').version);
      const dispatcher = advised
        ? new undici.Agent({ keepAliveTimeout: SAFE_MS, keepAliveMaxTimeout: SAFE_MS })
        : new undici.Agent({ pipelining: 0 });
      return async () => {
        const res = await undici.request(url, { dispatcher });
        await res.body.text();
        return res.statusCode;
      };
    }
    case 'fetch': {
      const { Agent, setGlobalDispatcher } = await import('undici');
      console.log('version', process.version, 'undici', process.versions.undici);
      setGlobalDispatcher(
        advised
          ? new Agent({ keepAliveTimeout: SAFE_MS, keepAliveMaxTimeout: SAFE_MS })
          : new Agent({ pipelining: 0 }),
      );
      return async () => {
        const res = await fetch(url);
        await res.text();
        return res.status;
      };
    }
    default:
      throw new Error(`no client ${client}`);
  }
}

const request = await makeClient();
let failures = 0;
for (const pause of [null, ...pauses]) {
  if (pause !== null) await new Promise((resolve) => setTimeout(resolve, Number(pause) * 1000));
  try {
    console.log('ok', await request());
  } catch (e) {
    failures += 1;
    console.log('error', String(e));
  }
}
process.exit(failures ? 1 : 0);
