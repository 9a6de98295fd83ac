// Receive limits this client granted, and what happens when the host breaks them (§4, §5, §7).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CHANNEL, collector, connect, credits, frame, logical, resets, sendMessage, subscribe } from './harness.mjs';

const receive = { windowBytes: 4096, maximumFrameBytes: 1024, maximumMessageBytes: 2048 };

async function setup() {
  const ctx = await connect();
  const c = collector();
  const { sub, req } = await subscribe(ctx, { consumer: c, receive });
  return { ...ctx, c, sub, req };
}

function expectReset(t, code) {
  const sent = t.ws.take();
  const r = resets(sent);
  assert.equal(r.length, 1, `want one channel/reset, got ${JSON.stringify(sent)}`);
  assert.equal(r[0].params.code, code);
  assert.equal(r[0].params.channel, CHANNEL);
  assert.equal(r[0].params.subscriptionId, 's1');
  assert.equal(t.sub.ended, true);
  assert.equal(t.c.ends.length, 1);
  assert.equal(t.c.ends[0].code, code);
  assert.equal(t.c.ends[0].local, true);
}

// every returns cut points every n code units, so frames fit 1024 bytes.
function every(text, n) {
  const cuts = [];
  for (let i = n; i < text.length; i += n) cuts.push(i);
  return cuts;
}

// sendBig sends a terminal/output message of about 1900 bytes.
function sendBig(t, id) {
  const text = logical('terminal/output', { data: 'z'.repeat(900) });
  sendMessage(t.ws, id, text, every(text, 350));
}

// frameOfLength returns a frame whose whole JSON text has exactly n code units.
function frameOfLength(n, messageId = 1, final = true) {
  const f = frame(messageId, '', final);
  const pad = n - JSON.stringify(f).length;
  return frame(messageId, 'x'.repeat(pad), final);
}

test('subscribe sends the receive limits it will enforce', async () => {
  const t = await setup();
  assert.deepEqual(t.req.params, { channel: CHANNEL, flowControl: { receive } });
});

test('a frame exactly at maximumFrameBytes is accepted', async () => {
  const t = await setup();
  const f = frameOfLength(512, 1, false);
  assert.equal(JSON.stringify(f).length * 2, 1024);
  t.ws.recv(f);
  assert.equal(t.sub.ended, false);
  assert.deepEqual(t.ws.take(), []);
});

test('a frame one unit over maximumFrameBytes resets with frame-too-large', async () => {
  const t = await setup();
  t.ws.recv(frameOfLength(513, 1, false));
  expectReset(t, 'frame-too-large');
});

test('escaping counts toward the frame limit', async () => {
  const t = await setup();
  // 450 code units of "\u001b"-escaped ESCs are 900 bytes of data, but
  // every backslash is escaped again in the frame: over 1024 bytes of text.
  const text = logical('terminal/output', { data: '\x1b'.repeat(100) });
  const data = text.slice(0, 450);
  assert.ok(data.length * 2 <= 1024);
  assert.ok(JSON.stringify(frame(1, data)).length * 2 > 1024);
  t.ws.recv(frame(1, data));
  expectReset(t, 'frame-too-large');
});

test('a message over maximumMessageBytes resets with message-too-large', async () => {
  const t = await setup();
  const text = logical('terminal/output', { data: 'y'.repeat(1100) }); // > 1024 units = 2048 bytes
  assert.ok(text.length * 2 > 2048);
  sendMessage(t.ws, 1, text, [300, 600, 900]);
  expectReset(t, 'message-too-large');
  assert.equal(t.c.messages.length, 0, 'nothing of it was delivered');
});

test('message ids start at 1', async () => {
  const t = await setup();
  sendMessage(t.ws, 2, logical('terminal/output', { data: 'a' }));
  expectReset(t, 'protocol-error');
});

test('message ids increase by one', async () => {
  const t = await setup();
  sendMessage(t.ws, 1, logical('terminal/output', { data: 'a' }));
  sendMessage(t.ws, 3, logical('terminal/output', { data: 'b' }));
  expectReset(t, 'protocol-error');
  assert.equal(t.c.messages.length, 1);
});

test('a frame of another message while one is incomplete is a protocol error', async () => {
  const t = await setup();
  const text = logical('terminal/output', { data: 'abc' });
  t.ws.recv(frame(1, text.slice(0, 5)));
  t.ws.recv(frame(2, logical('terminal/output', { data: 'x' }), true));
  expectReset(t, 'protocol-error');
  assert.equal(t.c.messages.length, 0);
});

test('a frame that splits a surrogate pair is rejected, not repaired', async () => {
  const t = await setup();
  const text = logical('terminal/output', { data: 'a😀b' });
  const at = text.indexOf('😀') + 1; // between the two halves
  sendMessage(t.ws, 1, text, [at]);
  expectReset(t, 'protocol-error');
  assert.equal(t.c.messages.length, 0);
});

test('a message may start while outstanding < window and finish beyond it', async () => {
  const t = await setup();
  // Three messages of ~1900 bytes each: the third starts at ~3800 < 4096 and ends past it.
  for (let id = 1; id <= 3; id++) {
    const text = logical('terminal/output', { data: 'z'.repeat(900) });
    sendMessage(t.ws, id, text, every(text, 350));
  }
  assert.equal(t.c.messages.length, 3);
  assert.equal(t.sub.ended, false);
  assert.deepEqual(t.ws.take(), []);
  // A fourth start, with nothing credited, breaks the window.
  sendMessage(t.ws, 4, logical('terminal/output', { data: 'q' }));
  expectReset(t, 'protocol-error');
  assert.equal(t.c.messages.length, 3);
});

test('credit reopens the window', async () => {
  const t = await setup();
  for (let id = 1; id <= 3; id++) sendBig(t, id);
  for (const r of t.c.releases) r();
  const cr = credits(t.ws.take());
  assert.equal(cr.at(-1).params.consumedBytes, t.sub.receiveState().receivedBytes);
  sendMessage(t.ws, 4, logical('terminal/output', { data: 'q' }));
  assert.equal(t.sub.ended, false);
  assert.equal(t.c.messages.length, 4);
});

test('lifecycle messages may start beyond the window, once each', async () => {
  const t = await setup();
  for (let id = 1; id <= 3; id++) sendBig(t, id);
  sendMessage(t.ws, 4, logical('terminal/exit', { code: 0 }));
  assert.equal(t.sub.ended, false);
  assert.equal(t.c.messages[3].method, 'terminal/exit');
  sendMessage(t.ws, 5, logical('terminal/exit', { code: 1 }));
  expectReset(t, 'protocol-error');
});

test('a lifecycle-sized start beyond the window must really be lifecycle', async () => {
  const t = await setup();
  for (let id = 1; id <= 3; id++) sendBig(t, id);
  // Small, but terminal/output: not allowed beyond the window.
  t.ws.recv(frame(4, logical('terminal/output', { data: 'x' }).slice(0, 10)));
  assert.equal(t.sub.ended, false, 'undecided until final');
  t.ws.recv(frame(4, logical('terminal/output', { data: 'x' }).slice(10), true));
  expectReset(t, 'protocol-error');
});

test('a message that is not JSON-RPC is a protocol error', async () => {
  const t = await setup();
  sendMessage(t.ws, 1, '{"not":"rpc"}');
  expectReset(t, 'protocol-error');
});

test('channel/reset from the host ends the subscription and later frames are dropped', async () => {
  const t = await setup();
  t.ws.recv({ jsonrpc: '2.0', method: 'channel/reset', params: { channel: CHANNEL, subscriptionId: 's1', code: 'channel-closed', message: 'gone' } });
  assert.equal(t.sub.ended, true);
  assert.deepEqual(t.c.ends, [{ code: 'channel-closed', message: 'gone', local: false }]);
  sendMessage(t.ws, 1, logical('terminal/output', { data: 'late' }));
  assert.equal(t.c.messages.length, 0);
  assert.deepEqual(t.ws.take(), [], 'no reset echoed back, no credit');
});

test('connection close ends subscriptions and rejects pending requests with the close code', async () => {
  const t = await setup();
  const pending = t.session.request('channels/list', {});
  let closed;
  t.session.on('close', (info) => { closed = info; });
  t.ws.hostClose(1001, 'shutting down');
  await assert.rejects(pending, (err) => err.closeCode === 1001 && err.reason === 'shutting down');
  assert.deepEqual(closed, { code: 1001, reason: 'shutting down' });
  assert.equal(t.c.ends[0].code, 'connection-closed');
});
