// The terminal consumer: stream order and credit from write callbacks (§8).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { terminalConsumer } from '../src/terminal-stream.js';
import { collector, connect, credits, logical, sendMessage, subscribe } from './harness.mjs';

// FakeTerm queues writes like xterm's WriteBuffer and runs them on flush().
class FakeTerm {
  constructor() {
    this.rows = 24;
    this.cols = 80;
    this.ops = [];
    this.queue = [];
  }
  write(data, cb) {
    this.queue.push([data, cb]);
  }
  reset() {
    this.ops.push('reset');
  }
  resize(cols, rows) {
    this.cols = cols;
    this.rows = rows;
    this.ops.push(`resize ${rows}x${cols}`);
  }
  flush(n = Infinity) {
    while (n-- > 0 && this.queue.length) {
      const [data, cb] = this.queue.shift();
      if (data) this.ops.push(`write ${data}`);
      cb?.();
    }
  }
}

async function setup(receive) {
  const ctx = await connect();
  const term = new FakeTerm();
  const events = [];
  const c = terminalConsumer(term, {
    onSize: (r, col) => events.push(`size ${r}x${col}`),
    onReady: () => events.push('ready'),
    onExit: (e) => events.push(`exit ${e.code}`),
  });
  await subscribe(ctx, { consumer: { ...collector(), onMessage: c.onMessage }, receive });
  let id = 1;
  const send = (method, params) => {
    const text = logical(method, params);
    sendMessage(ctx.ws, id++, text);
    return text.length * 2;
  };
  return { ...ctx, term, events, send };
}

test('a snapshot is applied in stream order and credited only once rendered', async () => {
  const t = await setup();
  let total = t.send('terminal/output', { data: 'old' });
  total += t.send('terminal/reset', { rows: 5, cols: 10 });
  total += t.send('terminal/output', { data: 'new' });
  total += t.send('channel/ready', {});
  assert.deepEqual(t.term.ops, [], 'nothing applied before xterm processes its queue');
  assert.deepEqual(credits(t.ws.take()), [], 'no credit before the write callbacks');
  t.term.flush();
  // The reset comes after "old" was parsed, never before it.
  assert.deepEqual(t.term.ops, ['write old', 'reset', 'resize 5x10', 'write new']);
  assert.deepEqual(t.events, ['size 5x10', 'ready']);
  assert.deepEqual(credits(t.ws.take()).map((m) => m.params.consumedBytes), [total]);
});

test('under a flood, outstanding output never exceeds window + one message', async () => {
  const receive = { windowBytes: 16384, maximumFrameBytes: 16384, maximumMessageBytes: 16384 };
  const t = await setup(receive);
  const line = 'y\r\n'.repeat(500);
  // A host that sends whenever the window allows, and a terminal that
  // parses a few writes per turn: the queue stays bounded and nothing resets.
  let hostConsumed = 0;
  let sent = 0;
  let maxQueued = 0;
  for (let turn = 0; turn < 200; turn++) {
    while (sent - hostConsumed < receive.windowBytes) sent += t.send('terminal/output', { data: line });
    const queued = t.term.queue.reduce((n, [d]) => n + d.length * 2, 0);
    maxQueued = Math.max(maxQueued, queued);
    t.term.flush(2);
    for (const m of credits(t.ws.take())) hostConsumed = m.params.consumedBytes;
  }
  assert.ok(hostConsumed > 50 * receive.windowBytes, `throughput stalled at ${hostConsumed}`);
  assert.ok(maxQueued < receive.windowBytes + receive.maximumMessageBytes, `xterm queue reached ${maxQueued}`);
});

test('terminal/exit is surfaced after the output before it', async () => {
  const t = await setup();
  t.send('terminal/output', { data: 'bye' });
  t.send('terminal/exit', { code: 3 });
  t.term.flush(1);
  assert.deepEqual(t.events, []);
  t.term.flush();
  assert.deepEqual(t.events, ['exit 3']);
});

test('the consumer counts output and snapshots (terminal/reset) for the test hooks', async () => {
  const t = await setup();
  const c = terminalConsumer(t.term);
  const release = () => {};
  assert.deepEqual(c.counts, { output: 0, outputChars: 0, resets: 0 });
  c.onMessage({ method: 'terminal/reset', params: { rows: 5, cols: 10 } }, release);
  c.onMessage({ method: 'terminal/output', params: { data: 'héllo' } }, release);
  c.onMessage({ method: 'terminal/output', params: { data: 'ab' } }, release);
  c.onMessage({ method: 'channel/ready', params: {} }, release);
  c.onMessage({ method: 'terminal/reset', params: { rows: 5, cols: 10 } }, release);
  assert.deepEqual(c.counts, { output: 2, outputChars: 7, resets: 2 });
});
