// Reconnect with backoff, re-subscribe, credential use (Client, CredentialStore).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backoffDelay, Client, ErrorCode } from '../src/session.js';
import { CredentialStore, formatFragment, parseFragment, STORAGE_KEY } from '../src/credentials.js';
import { CHANNEL, collector, FakeSocket, initResult } from './harness.mjs';

const tick = () => new Promise((r) => setImmediate(r));

function memStorage() {
  const m = new Map();
  return {
    m,
    getItem: (k) => (m.has(k) ? m.get(k) : null),
    setItem: (k, v) => m.set(k, String(v)),
    removeItem: (k) => m.delete(k),
  };
}

function fakeLocation(hash) {
  return { hash, pathname: '/', search: '' };
}

function fakeHistory() {
  return { state: null, urls: [], replaceState(s, _t, url) { this.urls.push(url); } };
}

function newClient(credentials) {
  const timers = [];
  const states = [];
  const client = new Client({
    url: 'ws://127.0.0.1:7681/v1/ws',
    WebSocket: FakeSocket,
    credentials,
    setTimeout: (f, ms) => { timers.push({ f, ms }); return timers.length; },
    clearTimeout: () => {},
    random: () => 0.5,
  });
  client.on('state', (s) => states.push(s));
  return { client, timers, states };
}

const lastSocket = () => FakeSocket.instances[FakeSocket.instances.length - 1];

// hostAccept plays the host for initialize on the newest socket.
async function hostAccept(extra) {
  const ws = lastSocket();
  ws.open();
  const [init] = ws.take();
  ws.recv({ jsonrpc: '2.0', id: init.id, result: initResult(extra) });
  await tick();
  return { ws, init };
}

test('backoff doubles from 250 ms and is capped at 5 s', () => {
  const d = [1, 2, 3, 4, 5, 6, 7, 20].map((n) => backoffDelay(n, undefined, () => 0.5));
  assert.deepEqual(d, [250, 500, 1000, 2000, 4000, 5000, 5000, 5000]);
  for (let n = 1; n < 30; n++) {
    assert.ok(backoffDelay(n, undefined, () => 0.999) <= 5000);
    assert.ok(backoffDelay(n, undefined, () => 0) >= 200);
  }
});

test('ticket → initialize token; reconnectToken used after a drop; channel re-subscribed', async () => {
  const storage = memStorage();
  const creds = new CredentialStore(storage);
  const hist = fakeHistory();
  const frag = creds.takeFromLocation(fakeLocation('#ticket=TICKET-1&channel=ahp-terminal:/t1'), hist);
  assert.equal(frag.get('channel'), 'ahp-terminal:/t1');
  assert.deepEqual(hist.urls, ['/#channel=ahp-terminal:/t1'], 'ticket removed from the address bar');

  const { client, timers, states } = newClient(creds);
  client.start();
  const ws1 = lastSocket();
  assert.equal(ws1.url, 'ws://127.0.0.1:7681/v1/ws');
  assert.equal(ws1.protocol, 'ahp.v1');
  const { init } = await hostAccept({ reconnectToken: 'RECONNECT-1' });
  assert.equal(init.method, 'initialize');
  assert.deepEqual(init.params, {
    protocolVersion: 'ahp/1',
    token: 'TICKET-1',
    client: { name: 'ahpd-web', version: '0' },
    capabilities: { flowControl: true, windowUpdates: true },
  });
  assert.equal(states.at(-1).state, 'connected');
  assert.equal(storage.getItem(STORAGE_KEY), 'RECONNECT-1');

  const c = collector({ auto: true });
  const ends = [];
  client.attach(CHANNEL, { ...c, onEnd: (info) => ends.push(info) });
  const [sub1] = ws1.take();
  assert.equal(sub1.method, 'subscribe');
  assert.equal(sub1.params.channel, CHANNEL);

  ws1.hostClose(1001, 'host shutting down');
  const s = states.at(-1);
  assert.equal(s.state, 'reconnecting');
  assert.equal(s.closeCode, 1001);
  assert.equal(s.closeReason, 'host shutting down');
  assert.equal(s.retryInMs, 250);
  assert.equal(timers.length, 1);

  timers[0].f();
  const { ws: ws2, init: init2 } = await hostAccept({});
  assert.notEqual(ws2, ws1);
  assert.equal(init2.params.token, 'RECONNECT-1', 'the single-use ticket is not sent twice');
  const [sub2] = ws2.take();
  assert.equal(sub2.method, 'subscribe');
  assert.equal(sub2.params.channel, CHANNEL);
  client.stop();
});

test('failed attempts back off further', async () => {
  const creds = new CredentialStore(memStorage());
  creds.takeFromLocation(fakeLocation('#token=T'), fakeHistory());
  const { client, timers, states } = newClient(creds);
  client.start();
  lastSocket().hostClose(1006, '');
  await tick();
  timers.at(-1).f();
  lastSocket().hostClose(1006, '');
  await tick();
  timers.at(-1).f();
  lastSocket().hostClose(1006, '');
  await tick();
  assert.deepEqual(timers.map((t) => t.ms), [250, 500, 1000]);
  assert.equal(states.at(-1).state, 'reconnecting');
  client.stop();
  assert.equal(states.at(-1).state, 'closed');
});

test('a refused credential stops reconnecting and is forgotten', async () => {
  const storage = memStorage();
  storage.setItem(STORAGE_KEY, 'OLD');
  const creds = new CredentialStore(storage);
  const { client, timers, states } = newClient(creds);
  client.start();
  const ws = lastSocket();
  ws.open();
  const [init] = ws.take();
  assert.equal(init.params.token, 'OLD');
  ws.recv({ jsonrpc: '2.0', id: init.id, error: { code: ErrorCode.UNAUTHORIZED, message: 'unauthorized' } });
  await tick();
  assert.equal(states.at(-1).state, 'closed');
  assert.equal(states.at(-1).error, 'unauthorized');
  assert.equal(timers.length, 0, 'no retry');
  assert.equal(creds.token(), null);
});

test('a kick (1008, then the reconnect token refused) ends with the host\'s reason', async () => {
  const creds = new CredentialStore(memStorage());
  creds.takeFromLocation(fakeLocation('#ticket=TICKET-K'), fakeHistory());
  const { client, timers, states } = newClient(creds);
  client.start();
  const { ws: ws1 } = await hostAccept({ reconnectToken: 'RECONNECT-K' });
  ws1.hostClose(1008, 'shift over');
  assert.equal(states.at(-1).state, 'reconnecting');
  timers.at(-1).f();
  const ws2 = lastSocket();
  ws2.open();
  const [init] = ws2.take();
  assert.equal(init.params.token, 'RECONNECT-K');
  ws2.recv({ jsonrpc: '2.0', id: init.id, error: { code: ErrorCode.UNAUTHORIZED, message: 'unauthorized: unknown, used or revoked token' } });
  await tick();
  const s = states.at(-1);
  assert.equal(s.state, 'closed');
  assert.equal(s.error, 'ended');
  assert.equal(s.closeCode, 1008);
  assert.equal(s.closeReason, 'shift over');
  assert.equal(timers.length, 1, 'no further retry');
});

test('without a credential the client does not connect', () => {
  const n = FakeSocket.instances.length;
  const { client, states } = newClient(new CredentialStore(memStorage()));
  client.start();
  assert.equal(FakeSocket.instances.length, n);
  assert.deepEqual(states.at(-1), { state: 'closed', attempt: 0, error: 'no-credential' });
});

test('#token= is kept for reloads when no reconnectToken is issued', () => {
  const storage = memStorage();
  const creds = new CredentialStore(storage);
  creds.takeFromLocation(fakeLocation('#token=abc%2Bdef'), fakeHistory());
  assert.equal(creds.token(), 'abc+def');
  creds.accepted(initResult());
  assert.equal(storage.getItem(STORAGE_KEY), 'abc+def');
  // A used ticket without a reconnectToken cannot be reused.
  creds.takeFromLocation(fakeLocation('#ticket=T'), fakeHistory());
  creds.accepted(initResult());
  assert.equal(creds.token(), null);
});

test('fragment parsing keeps + and round-trips channel URIs', () => {
  const m = parseFragment('#channel=ahp-terminal:/a+b&ticket=x%26y');
  assert.equal(m.get('channel'), 'ahp-terminal:/a+b');
  assert.equal(m.get('ticket'), 'x&y');
  assert.equal(formatFragment(new Map([['channel', 'ahp-terminal:/a b']])), '#channel=ahp-terminal:/a%20b');
  assert.equal(formatFragment(new Map()), '');
});

test('a local close (dead host) ends the session at once and reconnects', async () => {
  const creds = new CredentialStore(memStorage());
  creds.takeFromLocation(fakeLocation('#token=T'), fakeHistory());
  const { client, timers, states } = newClient(creds);
  client.start();
  const { ws } = await hostAccept({});
  const session = client.session;
  const pending = session.request('channels/list', {});
  session.close(4000, 'host not responding');
  await assert.rejects(pending, (err) => err.closeCode === 4000);
  assert.equal(client.session, null);
  assert.deepEqual(ws.closed, { code: 4000, reason: 'host not responding' });
  assert.equal(states.at(-1).state, 'reconnecting');
  assert.equal(states.at(-1).closeCode, 4000);
  assert.equal(timers.length, 1);
  // A late message on the old socket is not processed.
  ws.onmessage?.({ data: '{"jsonrpc":"2.0","method":"channel/frame","params":{}}' });
  assert.equal(session.stats.droppedNotifications, 0);
  client.stop();
});

test('the host\'s 1001 stays the close shown while the reconnects fail with 1006', async () => {
  const creds = new CredentialStore(memStorage());
  creds.takeFromLocation(fakeLocation('#token=T'), fakeHistory());
  const { client, timers, states } = newClient(creds);
  client.start();
  const { ws } = await hostAccept({});
  ws.hostClose(1001, 'host shutting down');
  assert.deepEqual(states.at(-1).lastClose, { code: 1001, reason: 'host shutting down' });
  for (let i = 0; i < 2; i++) {
    timers.at(-1).f();
    lastSocket().hostClose(1006, ''); // nothing listens
    await tick();
    const s = states.at(-1);
    assert.equal(s.state, 'reconnecting');
    assert.equal(s.closeCode, 1006, 'the attempt\'s own failure');
    assert.deepEqual(s.lastClose, { code: 1001, reason: 'host shutting down' }, 'the daemon\'s close is kept');
  }
  client.stop();
});

test('after a 1001, a refused reconnect token means the daemon restarted', async () => {
  const creds = new CredentialStore(memStorage());
  creds.takeFromLocation(fakeLocation('#ticket=TICKET-R'), fakeHistory());
  const { client, timers, states } = newClient(creds);
  client.start();
  const { ws: ws1 } = await hostAccept({ reconnectToken: 'RECONNECT-R' });
  ws1.hostClose(1001, 'host shutting down');
  timers.at(-1).f();
  lastSocket().hostClose(1006, ''); // restarting
  await tick();
  timers.at(-1).f();
  const ws2 = lastSocket();
  ws2.open();
  const [init] = ws2.take();
  assert.equal(init.params.token, 'RECONNECT-R');
  ws2.recv({ jsonrpc: '2.0', id: init.id, error: { code: ErrorCode.UNAUTHORIZED, message: 'unauthorized: unknown, used or revoked token' } });
  await tick();
  const s = states.at(-1);
  assert.equal(s.state, 'closed');
  assert.equal(s.error, 'restarted');
  assert.equal(s.credential, 'reconnect');
  assert.deepEqual(s.lastClose, { code: 1001, reason: 'host shutting down' });
  assert.equal(creds.token(), null);
});

test('after a 1001, an accepted reconnect is flagged as a restarted daemon; a refused saved token says which credential', async () => {
  const creds = new CredentialStore(memStorage());
  creds.takeFromLocation(fakeLocation('#token=ADMIN'), fakeHistory());
  const { client, timers, states } = newClient(creds);
  client.start();
  const { ws } = await hostAccept({});
  assert.equal(states.at(-1).restarted, false);
  ws.hostClose(1001, 'host shutting down');
  timers.at(-1).f();
  const { ws: ws2 } = await hostAccept({});
  assert.equal(states.at(-1).state, 'connected');
  assert.equal(states.at(-1).restarted, true);
  ws2.hostClose(1006, ''); // not a shutdown
  timers.at(-1).f();
  await hostAccept({});
  assert.equal(states.at(-1).restarted, false);
  client.stop();

  // A reload whose saved token is refused (no close seen by this page).
  const storage = memStorage();
  storage.setItem(STORAGE_KEY, 'SAVED');
  const c2 = newClient(new CredentialStore(storage));
  c2.client.start();
  const w = lastSocket();
  w.open();
  const [init] = w.take();
  w.recv({ jsonrpc: '2.0', id: init.id, error: { code: ErrorCode.UNAUTHORIZED, message: 'unauthorized' } });
  await tick();
  assert.equal(c2.states.at(-1).error, 'unauthorized');
  assert.equal(c2.states.at(-1).credential, 'reconnect');
});

test('server.started tells a restarted daemon from a reconnect to the same one, with or without a 1001', async () => {
  const creds = new CredentialStore(memStorage());
  creds.takeFromLocation(fakeLocation('#token=ADMIN'), fakeHistory());
  const { client, timers, states } = newClient(creds);
  client.start();
  const A = { name: 'ahpd', version: 'test', started: '2026-12-07T05:00:00.000Z' };
  const B = { name: 'ahpd', version: 'test', started: '2026-12-07T05:10:00.000Z' };
  const { ws } = await hostAccept({ server: A });
  assert.equal(states.at(-1).restarted, false);
  // A crash: no close frame (1006), and another daemon answers.
  ws.hostClose(1006, '');
  timers.at(-1).f();
  const { ws: ws2 } = await hostAccept({ server: B });
  assert.equal(states.at(-1).restarted, true, 'a new started after a 1006 is a restart');
  // A 1001 and the same daemon answering (started unchanged) is not.
  ws2.hostClose(1001, 'host shutting down');
  timers.at(-1).f();
  await hostAccept({ server: B });
  assert.equal(states.at(-1).restarted, false, 'the same started after a 1001 is the same daemon');
  client.stop();
});

test('nothing is sent while the socket is closing (the browser would log an error)', async () => {
  const creds = new CredentialStore(memStorage());
  creds.takeFromLocation(fakeLocation('#token=T'), fakeHistory());
  const { client } = newClient(creds);
  client.start();
  const { ws } = await hostAccept({});
  ws.readyState = 2; // CLOSING: the host's close frame is in, the close event not yet
  assert.equal(client.session.notify('channel/credit', {}), false);
  assert.deepEqual(ws.take(), []);
  ws.readyState = 1;
  assert.equal(client.session.notify('channel/credit', {}), true);
  client.stop();
});
