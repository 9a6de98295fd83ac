// The wire/flow layer on its own (wire.js): Receiver and Sender without a
// Session or socket, and that the module stays free of DOM and I/O.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { DEFAULT_RECEIVE, frameEnvelope, parseSize, Receiver, receiveFromQuery, Sender } from '../src/wire.js';
import { logical } from './harness.mjs';

const LIMITS = { windowBytes: 4096, maximumFrameBytes: 1024, maximumMessageBytes: 4096 };

// feed passes text to r as frames cut at cuts and returns the last result.
function feed(r, id, text, cuts = []) {
  const points = [0, ...cuts, text.length];
  let out;
  for (let i = 0; i + 1 < points.length; i++) {
    const env = frameEnvelope('ahp-terminal:/t1', 's1', id, text.slice(points[i], points[i + 1]), i + 2 === points.length);
    out = r.frame(env.params, JSON.stringify(env).length);
    if (i + 2 < points.length) assert.equal(out, null, 'a non-final frame completes nothing');
  }
  return out;
}

test('Receiver: reassembles, then credits the released prefix at a quarter window or when idle', () => {
  const r = new Receiver({ ...LIMITS });
  const text = logical('terminal/output', { data: 'x'.repeat(300) });
  const a = feed(r, 1, text, [100, 200]);
  assert.deepEqual(a.message, { jsonrpc: '2.0', method: 'terminal/output', params: { data: 'x'.repeat(300) } });
  assert.equal(a.bytes, text.length * 2);
  const b = feed(r, 2, logical('terminal/output', { data: 'second' }));
  assert.equal(b.message?.params.data, 'second');
  const ea = r.deliver(a.bytes);
  const eb = r.deliver(b.bytes);
  assert.equal(r.takeCredit(), null, 'nothing released');
  assert.equal(r.release(eb), true);
  assert.equal(r.takeCredit(), null, 'out of order: the prefix has not moved');
  assert.equal(r.release(ea), true);
  assert.equal(r.release(ea), false, 'a second release counts nothing');
  assert.equal(r.takeCredit(), a.bytes + b.bytes);
  assert.equal(r.takeCredit(), null, 'sent once');
  assert.deepEqual(r.state(), { receivedBytes: a.bytes + b.bytes, releasedBytes: a.bytes + b.bytes, creditSent: a.bytes + b.bytes, unreleased: 0 });
});

test('Receiver: breaches come back as channel/reset codes', () => {
  const text = logical('terminal/output', { data: 'hi' });
  const code = (r) => r?.error?.code;
  assert.equal(code(new Receiver({ ...LIMITS }).frame({ messageId: 1, data: text, final: true }, 513)), 'frame-too-large');
  assert.equal(code(new Receiver({ ...LIMITS }).frame({ messageId: 2, data: text, final: true }, 100)), 'protocol-error');
  assert.equal(code(new Receiver({ ...LIMITS }).frame({ messageId: 1, data: 'a\ud83d' }, 100)), 'protocol-error');
  assert.equal(code(new Receiver({ ...LIMITS }).frame({ messageId: 1, data: 7 }, 100)), 'protocol-error');
  const big = new Receiver({ ...LIMITS, maximumFrameBytes: 2048 });
  for (let i = 0; i < 4; i++) assert.equal(big.frame({ messageId: 1, data: 'y'.repeat(500) }, 600), null);
  assert.equal(code(big.frame({ messageId: 1, data: 'y'.repeat(100) }, 200)), 'message-too-large');
});

test('Sender: frames fit the host limits, the window holds messages back, credit reopens it', () => {
  const limits = { windowBytes: 1024, maximumFrameBytes: 1024, maximumMessageBytes: 1024 };
  const s = new Sender('ahp-terminal:/t1', 's1', limits);
  assert.equal(s.enqueue('terminal/input', 'z'.repeat(1500)), true);
  const first = s.pump();
  assert.equal(first.error, undefined);
  assert.equal(first.messages, 1, 'one message starts while the window is open, then it is shut');
  for (const f of first.frames) assert.ok(f.length * 2 <= limits.maximumFrameBytes);
  assert.ok(s.outstanding >= limits.windowBytes);
  assert.deepEqual(s.pump(), { frames: [], messages: 0 });
  assert.equal(s.credit(s.outstanding - 2).code, 'invalid-credit', 'off a message boundary');
  assert.equal(s.credit(s.outstanding + 2).code, 'invalid-credit', 'beyond what was sent');
  assert.equal(s.credit(s.outstanding), null);
  assert.ok(s.pump().messages >= 1);
});

test('Sender: the queue bound refuses data and queues nothing', () => {
  const s = new Sender('ahp-terminal:/t1', 's1', { windowBytes: 1024, maximumFrameBytes: 1024, maximumMessageBytes: 1024 }, 100);
  assert.equal(s.enqueue('terminal/input', 'a'.repeat(50)), true);
  assert.equal(s.enqueue('terminal/input', 'b'), false);
  assert.deepEqual(s.state(), { sentBytes: 0, consumedBytes: 0, queuedMessages: 1, queuedBytes: 100 });
});

test('wire.js stays free of the DOM, sockets and timers', async () => {
  const src = await readFile(new URL('../src/wire.js', import.meta.url), 'utf8');
  const code = src.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
  assert.doesNotMatch(code, /\b(window|document|globalThis|self)\s*\.|\bWebSocket\b|\b(setTimeout|setInterval|fetch)\s*\(|^\s*import\b/m);
});

test('parseSize: digits with an optional KiB or MiB suffix, else null', () => {
  for (const [s, want] of [['0', 0], ['65536', 65536], ['64KiB', 64 << 10], ['4MiB', 4 << 20], ['1024MiB', 1 << 30]]) {
    assert.equal(parseSize(s), want, s);
  }
  for (const bad of ['', '-1', '4MB', '4 MiB', ' 4MiB', '1e6', '1.5MiB', 'MiB', '4kib', '4GiB']) {
    assert.equal(parseSize(bad), null, bad);
  }
});

test('receiveFromQuery: ?window=, ?frame=, ?message= override the defaults; bad values leave them', () => {
  const q = (s) => receiveFromQuery(new URLSearchParams(s));
  assert.deepEqual(q(''), { ...DEFAULT_RECEIVE });
  assert.deepEqual(q('window=4MiB'), { ...DEFAULT_RECEIVE, windowBytes: 4 << 20 });
  assert.deepEqual(q('window=8388608&frame=1MiB&message=2MiB'),
    { windowBytes: 8 << 20, maximumFrameBytes: 1 << 20, maximumMessageBytes: 2 << 20 });
  assert.deepEqual(q('frame=128KiB&renderer=dom'), { ...DEFAULT_RECEIVE, maximumFrameBytes: 128 << 10 });
  // Not a size, or limits §3 refuses (a window below the frame): the defaults, whole.
  for (const bad of ['window=-1', 'window=4MB', 'window=', 'window=1e6', 'window=0', 'window=4MiB&frame=8MiB', 'frame=512']) {
    assert.deepEqual(q(bad), { ...DEFAULT_RECEIVE }, bad);
  }
});
