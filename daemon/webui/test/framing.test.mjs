// Reassembly of channel/frame, and the UTF-16 size unit (PROTOCOL.md §4).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { escapedLength, fragment, size } from '../src/wire.js';
import { CHANNEL, collector, connect, credits, frame, logical, rng, sendMessage, subscribe } from './harness.mjs';

test('frames are concatenated and decoded only on final', async () => {
  const ctx = await connect();
  const c = collector();
  await subscribe(ctx, { consumer: c });
  const text = logical('terminal/output', { data: 'hello "world"\x1b[0m\n' });
  // Cut inside the "\u001b" escape and inside a \" pair: slices of JSON text, not of values.
  const esc = text.indexOf('\\u001b') + 3;
  const quote = text.indexOf('\\"') + 1;
  ctx.ws.recv(frame(1, text.slice(0, quote)));
  ctx.ws.recv(frame(1, text.slice(quote, esc)));
  assert.equal(c.messages.length, 0, 'delivered before final');
  ctx.ws.recv(frame(1, text.slice(esc), true));
  assert.deepEqual(c.messages, [{ jsonrpc: '2.0', method: 'terminal/output', params: { data: 'hello "world"\x1b[0m\n' } }]);
  assert.deepEqual(ctx.ws.take(), [], 'nothing sent before release');
});

test('frames of two subscriptions interleave and each reassembles', async () => {
  const ctx = await connect();
  const a = collector();
  const b = collector();
  await subscribe(ctx, { consumer: a, id: 'sa' });
  await subscribe(ctx, { consumer: b, id: 'sb', channel: 'ahp-terminal:/t2' });
  const ta = logical('terminal/output', { data: 'AAAA' });
  const tb = logical('terminal/output', { data: 'BBBB' });
  ctx.ws.recv(frame(1, ta.slice(0, 10), false, { subscriptionId: 'sa' }));
  ctx.ws.recv(frame(1, tb.slice(0, 7), false, { subscriptionId: 'sb', channel: 'ahp-terminal:/t2' }));
  ctx.ws.recv(frame(1, ta.slice(10), true, { subscriptionId: 'sa' }));
  ctx.ws.recv(frame(1, tb.slice(7), true, { subscriptionId: 'sb', channel: 'ahp-terminal:/t2' }));
  assert.equal(a.messages[0].params.data, 'AAAA');
  assert.equal(b.messages[0].params.data, 'BBBB');
});

test('frames for an unknown subscription are dropped and counted', async () => {
  const ctx = await connect();
  const c = collector();
  await subscribe(ctx, { consumer: c });
  ctx.ws.recv(frame(1, logical('terminal/output', { data: 'x' }), true, { subscriptionId: 'other' }));
  assert.equal(c.messages.length, 0);
  assert.equal(ctx.session.stats.droppedNotifications, 1);
  assert.deepEqual(ctx.ws.take(), [], 'no reset for a subscription that is not ours');
});

test('size counts UTF-16 code units × 2', () => {
  assert.equal(size('a'), 2);
  assert.equal(size('漢字'), 4); // CJK: one code unit each
  assert.equal(size('😀'), 4); // outside the BMP: a surrogate pair
  assert.equal(size('👩‍💻'), 10); // ZWJ sequence: 2 + 1 + 2 code units
  assert.equal(size('\x1b'), 2); // the raw value; escaping is counted in frames, not credit
});

test('credit is the UTF-16 size of the data strings, whatever the split', async () => {
  const data = '😀漢\x1b[31m"\\\u2028é👩‍💻';
  const text = logical('terminal/output', { data });
  // Any split that keeps pairs whole gives the same message size.
  for (const cuts of [[], [1], [5, 20, 30], [text.indexOf('\\u001b') + 2]]) {
    const ctx = await connect();
    const c = collector({ auto: true });
    await subscribe(ctx, { consumer: c });
    sendMessage(ctx.ws, 1, text, cuts);
    assert.equal(c.messages[0].params.data, data);
    const cr = credits(ctx.ws.take());
    assert.equal(cr.length, 1);
    assert.equal(cr[0].params.consumedBytes, text.length * 2, `cuts ${cuts}`);
    assert.deepEqual(
      { channel: cr[0].params.channel, subscriptionId: cr[0].params.subscriptionId },
      { channel: CHANNEL, subscriptionId: 's1' },
    );
  }
});

test('escapedLength matches JSON.stringify on random strings', () => {
  const alphabet = ['a', ' ', '"', '\\', '\n', '\t', '\b', '\f', '\r', '\x07', '\x00', '\x1b', '\x7f', 'é', '漢', '😀', '\u2028', '\ud83d', '\ude00', '<', '&'];
  const r = rng(1);
  for (let n = 0; n < 2000; n++) {
    let s = '';
    const len = Math.floor(r() * 20);
    for (let i = 0; i < len; i++) s += alphabet[Math.floor(r() * alphabet.length)];
    assert.equal(escapedLength(s), JSON.stringify(s).length - 2, JSON.stringify(s));
  }
});

test('fragment never exceeds its budget and never splits a pair', () => {
  const r = rng(2);
  const alphabet = ['x', '"', '\\', '\x1b', '😀', '漢', '\n'];
  for (let n = 0; n < 500; n++) {
    let s = '';
    const len = Math.floor(r() * 200);
    for (let i = 0; i < len; i++) s += alphabet[Math.floor(r() * alphabet.length)];
    const budget = 6 + Math.floor(r() * 40); // the widest unit, \u001b, is 6
    const parts = fragment(s, budget);
    assert.equal(parts.join(''), s);
    for (const p of parts) {
      assert.ok(JSON.stringify(p).length - 2 <= budget, `${JSON.stringify(p)} over ${budget}`);
      assert.ok(!/^[\udc00-\udfff]/.test(p) && !/[\ud800-\udbff]$/.test(p), `split pair in ${JSON.stringify(p)}`);
    }
  }
  assert.throws(() => fragment('\x00', 5), RangeError, 'a 6-unit escape cannot fit 5');
});

test('empty frames are not kept', async () => {
  const ctx = await connect();
  const c = collector();
  const { sub } = await subscribe(ctx, { consumer: c });
  const text = logical('terminal/output', { data: 'x' });
  ctx.ws.recv(frame(1, text.slice(0, 4)));
  for (let i = 0; i < 1000; i++) ctx.ws.recv(frame(1, ''));
  assert.equal(sub._rx._active.parts.length, 1);
  ctx.ws.recv(frame(1, text.slice(4), true));
  assert.equal(c.messages[0].params.data, 'x');
});
