// The items service's API, through its client (node:test, no npm
// packages).
//
// Some tests wait between calls, as a real suite's do (a job to finish, a
// cache to expire): 1.5 s and 2.5 s, the longer ones past the service's
// 2 s idle timeout. The agent's next call then either opens a new socket
// (AGENT_TIMEOUT_MS=1000: it closed the idle one after 1 s) or reuses the
// old one just as the service closes it (5000): that reuse is what the
// guard catches, even in a run in which no request was lost.
'use strict';

const assert = require('node:assert');
const { after, test } = require('node:test');
const { setTimeout: sleep } = require('node:timers/promises');
const { ItemsClient } = require('./items-client');

// Longer than the service's idle timeout (2 s), as a suite's waits are.
const LONG_WAIT_MS = 2500;
// Shorter than it, and longer than the fixed agent's timeout (1 s).
const SHORT_WAIT_MS = 1500;

const items = new ItemsClient();
after(() => items.close());

test('a new item is 201 with its location', async () => {
  const response = await items.create('lamp', 19.5);
  assert.equal(response.status, 201);
  assert.equal(response.json.name, 'lamp');
  assert.equal(response.json.price, 19.5);
  assert.equal(response.headers.location, `/items/${response.json.id}`);
});

test('bad input is 422 naming each field', async () => {
  const response = await items.create('  ', -1);
  assert.equal(response.status, 422);
  const fields = response.json.detail.map((error) => error.loc.at(-1));
  assert.deepEqual(fields, ['name', 'price']);
  assert.equal((await items.createRaw(['not', 'an', 'object'])).status, 422);
});

test('an item reads back after a wait', async () => {
  const created = (await items.create('desk', 120)).json;
  await sleep(LONG_WAIT_MS);
  const response = await items.get(created.id);
  assert.equal(response.status, 200);
  assert.deepEqual(response.json, created);
});

test('a missing item is 404 every time', async () => {
  const first = await items.get(999999);
  assert.equal(first.status, 404);
  assert.deepEqual(first.json, { detail: 'item 999999 not found' });
  await sleep(SHORT_WAIT_MS);
  assert.equal((await items.get(999999)).status, 404);
});

test('the list holds every item created', async () => {
  const created = [];
  for (const name of ['pen', 'ink']) {
    created.push((await items.create(name, 5)).json.id);
  }
  await sleep(LONG_WAIT_MS);
  const response = await items.list();
  assert.equal(response.status, 200);
  const listed = response.json.items.map((item) => item.id);
  for (const id of created) {
    assert.ok(listed.includes(id), `item ${id} is listed`);
  }
});
