// Client→host data: fragmentation under hostReceive and the soft window (§4, §5).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CHANNEL, collector, connect, resets, rng, subscribe } from './harness.mjs';

const MIN = { windowBytes: 1024, maximumFrameBytes: 1024, maximumMessageBytes: 1024 };

async function setup(hostReceive = MIN, { role = 'control', options } = {}) {
  const ctx = await connect({ role });
  const { sub } = await subscribe(ctx, { hostReceive, consumer: collector(), options });
  return { ...ctx, sub };
}

// decode checks every frame the client sent and returns the logical messages.
function decode(raw, hostReceive) {
  const messages = [];
  let cur = null;
  let nextId = 1;
  let bytes = 0;
  for (const text of raw) {
    assert.ok(text.length * 2 <= hostReceive.maximumFrameBytes,
      `frame of ${text.length * 2} bytes over ${hostReceive.maximumFrameBytes}`);
    const m = JSON.parse(text);
    assert.equal(m.method, 'channel/frame');
    const p = m.params;
    assert.equal(p.channel, CHANNEL);
    assert.equal(p.subscriptionId, 's1');
    assert.ok(!/^[\udc00-\udfff]/.test(p.data) && !/[\ud800-\udbff]$/.test(p.data), `split pair: ${JSON.stringify(p.data)}`);
    if (!cur) {
      assert.equal(p.messageId, nextId, 'message ids are consecutive from 1');
      cur = { id: p.messageId, parts: [] };
    }
    assert.equal(p.messageId, cur.id, 'one message at a time');
    cur.parts.push(p.data);
    bytes += p.data.length * 2;
    if (p.final === true) {
      const text = cur.parts.join('');
      assert.ok(text.length * 2 <= hostReceive.maximumMessageBytes, 'message over maximumMessageBytes');
      const msg = JSON.parse(text);
      assert.equal(msg.jsonrpc, '2.0');
      messages.push({ ...msg, size: text.length * 2, end: bytes });
      cur = null;
      nextId++;
    } else {
      assert.equal(p.final, undefined);
    }
  }
  assert.equal(cur, null, 'a message was left incomplete');
  return messages;
}

function credit(t, consumedBytes) {
  t.ws.recv({ jsonrpc: '2.0', method: 'channel/credit', params: { channel: CHANNEL, subscriptionId: 's1', consumedBytes } });
}

test('input is a terminal/input logical message in channel/frame', async () => {
  const t = await setup({ windowBytes: 65536, maximumFrameBytes: 16384, maximumMessageBytes: 65536 });
  assert.equal(t.sub.sendInput('ls\r'), true);
  const msgs = decode(t.ws.takeRaw(), t.sub.send);
  assert.deepEqual(msgs.map((m) => [m.method, m.params]), [['terminal/input', { data: 'ls\r' }]]);
});

test('emoji at every boundary offset: no split pair, every frame fits, data round-trips', async () => {
  for (let pad = 0; pad < 300; pad += 1) {
    const t = await setup({ windowBytes: 1 << 20, maximumFrameBytes: 1024, maximumMessageBytes: 1 << 20 });
    const data = 'a'.repeat(pad) + '😀'.repeat(400) + '"\\\x1b漢';
    t.sub.sendInput(data);
    const raw = t.ws.takeRaw();
    assert.ok(raw.length > 1, 'expected several frames');
    const msgs = decode(raw, t.sub.send);
    assert.equal(msgs.map((m) => m.params.data).join(''), data, `pad ${pad}`);
  }
});

test('random input under random host limits round-trips within every limit', async () => {
  const r = rng(7);
  const alphabet = ['a', ' ', '"', '\\', '\r', '\x1b', '\x03', '\x7f', 'é', '漢', '😀', '👩‍💻', '\u2028', '<'];
  for (let n = 0; n < 150; n++) {
    const frameBytes = 1024 + Math.floor(r() * 3000);
    const hostReceive = {
      windowBytes: frameBytes + Math.floor(r() * 8000),
      maximumFrameBytes: frameBytes,
      maximumMessageBytes: frameBytes + Math.floor(r() * 6000),
    };
    const t = await setup(hostReceive);
    let data = '';
    const len = Math.floor(r() * 3000);
    for (let i = 0; i < len; i++) data += alphabet[Math.floor(r() * alphabet.length)];
    t.sub.sendInput(data);
    // Play a host that credits everything it gets until the queue drains.
    const all = [];
    for (let guard = 0; guard < 1000; guard++) {
      const raw = t.ws.takeRaw();
      if (raw.length === 0) break;
      all.push(...raw);
      credit(t, t.sub.sendState().sentBytes);
    }
    const msgs = decode(all, hostReceive);
    assert.equal(msgs.map((m) => m.params.data).join(''), data);
    assert.equal(t.sub.sendState().queuedMessages, 0);
  }
});

test('a message starts only while outstanding < window; credit resumes sending', async () => {
  const t = await setup(MIN);
  // Keystroke messages of ~130 bytes each, until the window shuts.
  let n = 0;
  while (t.sub.outstanding < MIN.windowBytes) {
    assert.equal(t.sub.sendInput(String(n++)), true);
    assert.ok(n < 100, 'window never shut');
  }
  const msgs = decode(t.ws.takeRaw(), MIN);
  assert.equal(msgs.length, n, 'every keystroke sent while the window was open');
  // No message started at or beyond the window; the last one may end beyond it.
  for (const m of msgs) assert.ok(m.end - m.size < MIN.windowBytes, `message started at ${m.end - m.size}`);
  assert.ok(t.sub.outstanding < MIN.windowBytes + MIN.maximumMessageBytes);

  // Type while the window is shut: nothing is sent; input is coalesced.
  for (const k of ['x', 'y', 'z', '\r']) assert.equal(t.sub.sendInput(k), true);
  assert.deepEqual(t.ws.takeRaw(), [], 'nothing may start with the window shut');
  assert.equal(t.sub.sendState().queuedMessages, 1, 'adjacent input coalesced into one message');

  // Credit for the first message reopens the window: the queued message goes.
  credit(t, msgs[0].end);
  const raw = t.ws.takeRaw().map((x) => JSON.parse(x).params);
  assert.equal(raw[0].messageId, n + 1, 'ids continue');
  const text = raw.map((p) => p.data).join('');
  assert.deepEqual(JSON.parse(text).params, { data: 'xyz\r' });
  assert.equal(raw.at(-1).final, true);
});

test('a paste larger than maximumMessageBytes becomes several messages', async () => {
  const hostReceive = { windowBytes: 1 << 20, maximumFrameBytes: 1024, maximumMessageBytes: 2048 };
  const t = await setup(hostReceive);
  const data = '漢😀"'.repeat(1000);
  t.sub.sendInput(data);
  const msgs = decode(t.ws.takeRaw(), hostReceive);
  assert.ok(msgs.length > 1);
  assert.equal(msgs.map((m) => m.params.data).join(''), data);
});

test('queued input is bounded', async () => {
  const t = await setup(MIN, { options: { maxQueuedInputBytes: 100 } });
  while (t.sub.outstanding < MIN.windowBytes) t.sub.sendInput('k');
  t.ws.take();
  assert.equal(t.sub.sendInput('a'.repeat(50)), true); // 100 bytes: at the bound
  assert.equal(t.sub.sendInput('b'), false); // over it
  assert.equal(t.sub.stats.inputDroppedBytes, 2);
});

test('view role sends no input', async () => {
  const t = await setup(MIN, { role: 'view' });
  assert.equal(t.sub.sendInput('rm -rf /\r'), false);
  assert.deepEqual(t.ws.take(), []);
});

test('host credit beyond what was sent resets with invalid-credit', async () => {
  const t = await setup(MIN);
  t.sub.sendInput('a');
  t.ws.take();
  credit(t, t.sub.sendState().sentBytes + 2);
  const r = resets(t.ws.take());
  assert.equal(r.length, 1);
  assert.equal(r[0].params.code, 'invalid-credit');
  assert.equal(t.sub.ended, true);
});

test('host credit off a message boundary resets with invalid-credit; old credit is ignored', async () => {
  const t = await setup(MIN);
  t.sub.sendInput('a');
  t.sub.sendInput('b');
  const [first] = decode(t.ws.takeRaw(), MIN);
  credit(t, 0); // equal to the current: ignored
  credit(t, first.end); // on the boundary: accepted
  credit(t, first.end); // duplicate: ignored
  assert.deepEqual(t.ws.take(), []);
  assert.equal(t.sub.sendState().consumedBytes, first.end);
  credit(t, first.end + 10); // inside message 2
  assert.equal(resets(t.ws.take())[0]?.params.code, 'invalid-credit');
});

test('input queued when the subscription ends is dropped, not retried', async () => {
  const t = await setup(MIN);
  while (t.sub.outstanding < MIN.windowBytes) t.sub.sendInput('k');
  t.sub.sendInput('queued');
  t.ws.take();
  t.ws.hostClose(1006, '');
  assert.equal(t.sub.sendState().queuedMessages, 0);
  assert.equal(t.sub.sendInput('more'), false);
});
