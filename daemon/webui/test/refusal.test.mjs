// The page under a path prefix, and a refused upgrade (Host 421, Origin
// 403): the URLs it dials, the access check it asks, and the Client that
// stops instead of retrying (issue 39).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkURL, Client, diagnoseRefusal, websocketURL } from '../src/session.js';
import { FakeSocket } from './harness.mjs';

const tick = () => new Promise((r) => setImmediate(r));

test('the WebSocket and the check are relative to the page, under any prefix', () => {
  const cases = [
    ['http://127.0.0.1:7681/#ticket=T&channel=ahp-terminal:/shell', 'ws://127.0.0.1:7681/v1/ws', 'http://127.0.0.1:7681/v1/check'],
    ['http://127.0.0.1:8080/ahpd/?renderer=dom#ticket=T', 'ws://127.0.0.1:8080/ahpd/v1/ws', 'http://127.0.0.1:8080/ahpd/v1/check'],
    ['https://example.com/a/b/index.html', 'wss://example.com/a/b/v1/ws', 'https://example.com/a/b/v1/check'],
  ];
  for (const [page, ws, check] of cases) {
    assert.equal(websocketURL(page), ws, `websocketURL(${page})`);
    assert.equal(checkURL(page), check, `checkURL(${page})`);
  }
});

test('diagnoseRefusal: a refusal is returned, anything else is null', async () => {
  const answer = (status, body) => async (url, init) => {
    assert.equal(init.method, 'POST', 'POST, so that the browser sends Origin');
    if (body instanceof Error) throw body;
    return { ok: status >= 200 && status < 300, status, json: async () => (typeof body === 'string' ? JSON.parse(body) : body) };
  };
  const refused = { ok: false, refused: 'origin', status: 403, setting: 'allowedOrigins', fix: 'add "x:443" to allowedOrigins', host: 'x', origin: 'https://x' };
  assert.deepEqual(await diagnoseRefusal('u', answer(200, refused)), {
    refused: 'origin', status: 403, setting: 'allowedOrigins', fix: 'add "x:443" to allowedOrigins', host: 'x', origin: 'https://x',
  });
  assert.equal(await diagnoseRefusal('u', answer(200, { ok: true, host: 'x' })), null, 'allowed');
  assert.equal(await diagnoseRefusal('u', answer(502, 'bad gateway')), null, "a proxy's error");
  assert.equal(await diagnoseRefusal('u', answer(200, '<html>')), null, 'not JSON');
  assert.equal(await diagnoseRefusal('u', answer(0, new TypeError('Failed to fetch'))), null, 'the daemon is down');
  assert.equal(await diagnoseRefusal('u', answer(200, { ok: false, refused: 'token' })), null, 'an unknown refusal');
});

function newClient(diagnose) {
  const timers = [];
  const states = [];
  const client = new Client({
    url: 'ws://h/ahpd/v1/ws',
    WebSocket: FakeSocket,
    credentials: { token: () => 'tok', kind: () => 'ticket', accepted() {}, rejected() {} },
    setTimeout: (f, ms) => { timers.push({ f, ms }); return timers.length; },
    clearTimeout: () => {},
    random: () => 0.5,
    diagnose,
  });
  client.on('state', (s) => states.push(s));
  return { client, timers, states };
}

const lastSocket = () => FakeSocket.instances[FakeSocket.instances.length - 1];

test('a refused upgrade stops the client with the refusal; a daemon that is down is retried', async () => {
  const refusal = { refused: 'origin', status: 403, setting: 'allowedOrigins', fix: 'add it', host: 'h', origin: 'https://h' };
  let asked = 0;
  const { client, timers, states } = newClient(async () => { asked++; return refusal; });
  client.start();
  lastSocket().hostClose(1006); // the browser's report of a 403
  await tick();
  await tick();
  assert.equal(asked, 1);
  const last = states[states.length - 1];
  assert.equal(last.state, 'closed');
  assert.equal(last.error, 'refused');
  assert.deepEqual(last.refusal, refusal);
  assert.equal(last.closeCode, 403);
  assert.equal(timers.length, 0, 'no retry scheduled');

  // Nothing refused (the daemon is down): retried as before.
  const down = newClient(async () => null);
  down.client.start();
  lastSocket().hostClose(1006);
  await tick();
  await tick();
  assert.equal(down.states[down.states.length - 1].state, 'reconnecting');
  assert.equal(down.timers.length, 1);

  // A connection that opened and then dropped is not a refusal: no check.
  let checked = 0;
  const opened = newClient(async () => { checked++; return refusal; });
  opened.client.start();
  const ws = lastSocket();
  ws.open();
  ws.hostClose(1006);
  await tick();
  assert.equal(checked, 0);
  assert.equal(opened.states[opened.states.length - 1].state, 'reconnecting');
  client.stop();
  down.client.stop();
  opened.client.stop();
});
