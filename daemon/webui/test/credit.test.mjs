// Credit on release, in order, batched, with a final flush (§5; lessons rule 12).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { collector, connect, credits, logical, sendMessage, subscribe } from './harness.mjs';

const receive = { windowBytes: 65536, maximumFrameBytes: 16384, maximumMessageBytes: 65536 };

async function setup() {
  const ctx = await connect();
  const c = collector();
  const { sub } = await subscribe(ctx, { consumer: c, receive });
  return { ...ctx, c, sub };
}

// out sends n terminal/output messages of the given data and returns their sizes.
function out(t, firstId, n, data) {
  const sizes = [];
  for (let i = 0; i < n; i++) {
    const text = logical('terminal/output', { data });
    const cuts = [];
    for (let at = 4000; at < text.length; at += 4000) cuts.push(at);
    sendMessage(t.ws, firstId + i, text, cuts);
    sizes.push(text.length * 2);
  }
  return sizes;
}

test('arrival is not release: no credit until the consumer releases', async () => {
  const t = await setup();
  out(t, 1, 5, 'hello');
  assert.equal(t.c.messages.length, 5);
  assert.deepEqual(credits(t.ws.take()), []);
});

test('credit is batched at a quarter window and flushed when all is released', async () => {
  const t = await setup();
  const sizes = out(t, 1, 30, 'x'.repeat(900)); // ~1.9 KB each, 57 KB: all start within the 64 KiB window
  const quarter = receive.windowBytes / 4;
  const sent = [];
  let released = 0;
  for (let i = 0; i < sizes.length; i++) {
    t.c.releases[i]();
    released += sizes[i];
    for (const m of credits(t.ws.take())) sent.push({ at: i, consumed: m.params.consumedBytes });
  }
  // Every credit is cumulative, on a message boundary, and increasing.
  const boundaries = new Set(sizes.map((_, i) => sizes.slice(0, i + 1).reduce((a, b) => a + b, 0)));
  let prev = 0;
  for (const s of sent) {
    assert.ok(boundaries.has(s.consumed), `${s.consumed} is not a message boundary`);
    assert.ok(s.consumed > prev);
    prev = s.consumed;
  }
  // Batched: each intermediate credit waited for at least a quarter window.
  let last = 0;
  for (const s of sent.slice(0, -1)) {
    assert.ok(s.consumed - last >= quarter, `credit after only ${s.consumed - last} bytes`);
    last = s.consumed;
  }
  assert.ok(sent.length < sizes.length / 4, `${sent.length} credits for ${sizes.length} messages`);
  // Final flush: everything released is credited.
  assert.equal(sent.at(-1).consumed, released);
  assert.equal(sent.at(-1).at, sizes.length - 1);
});

test('a sub-threshold remainder is flushed once nothing is left to release', async () => {
  const t = await setup();
  const sizes = out(t, 1, 3, 'ab');
  t.c.releases[0]();
  t.c.releases[1]();
  assert.deepEqual(credits(t.ws.take()), [], 'below threshold with one message still held');
  t.c.releases[2]();
  const cr = credits(t.ws.take());
  assert.equal(cr.length, 1);
  assert.equal(cr[0].params.consumedBytes, sizes[0] + sizes[1] + sizes[2]);
});

test('release is in order: a later release waits for the earlier one', async () => {
  const t = await setup();
  const sizes = out(t, 1, 2, 'y'.repeat(9000)); // each ≥ a quarter window
  t.c.releases[1]();
  assert.deepEqual(credits(t.ws.take()), [], 'message 2 released before message 1 must not be credited');
  t.c.releases[0]();
  const cr = credits(t.ws.take());
  assert.equal(cr.length, 1);
  assert.equal(cr[0].params.consumedBytes, sizes[0] + sizes[1]);
});

test('releasing twice counts once', async () => {
  const t = await setup();
  const sizes = out(t, 1, 2, 'ab');
  t.c.releases[0]();
  t.c.releases[0]();
  t.c.releases[0]();
  assert.deepEqual(credits(t.ws.take()).map((m) => m.params.consumedBytes), []);
  t.c.releases[1]();
  assert.deepEqual(credits(t.ws.take()).map((m) => m.params.consumedBytes), [sizes[0] + sizes[1]]);
});

test('a consumer that releases synchronously (xterm after user input) credits at once', async () => {
  const ctx = await connect();
  const c = collector({ auto: true });
  await subscribe(ctx, { consumer: c, receive });
  const text = logical('terminal/output', { data: 'prompt$ ' });
  sendMessage(ctx.ws, 1, text, [7]);
  assert.deepEqual(credits(ctx.ws.take()).map((m) => m.params.consumedBytes), [text.length * 2]);
});

test('no credit is sent after the subscription ended', async () => {
  const t = await setup();
  out(t, 1, 1, 'ab');
  t.sub.unsubscribe(); // the host never answers here; the end is local at once
  t.ws.take();
  t.c.releases[0]();
  assert.deepEqual(credits(t.ws.take()), []);
});
