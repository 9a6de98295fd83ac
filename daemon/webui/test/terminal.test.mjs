// The terminal consumer: stream order and credit from write callbacks (§8).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PREVIEW_AFTER, PREVIEW_BEFORE, PREVIEW_END, PREVIEW_WAIT_MS, terminalConsumer } from '../src/terminal-stream.js';
import { collector, connect, credits, logical, sendMessage, subscribe } from './harness.mjs';

// FakeTerm queues writes like xterm's WriteBuffer and runs them on flush().
class FakeTerm {
  constructor() {
    this.rows = 24;
    this.cols = 80;
    this.ops = [];
    this.queue = [];
    this.renderListeners = new Set();
  }
  onRender(fn) {
    this.renderListeners.add(fn);
    return { dispose: () => this.renderListeners.delete(fn) };
  }
  render() {
    this.ops.push('render');
    for (const fn of [...this.renderListeners]) fn();
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
  assert.deepEqual(c.counts, { output: 0, outputChars: 0, resets: 0, previews: 0 });
  c.onMessage({ method: 'terminal/reset', params: { rows: 5, cols: 10 } }, release);
  c.onMessage({ method: 'terminal/output', params: { data: 'héllo' } }, release);
  c.onMessage({ method: 'terminal/output', params: { data: 'ab' } }, release);
  c.onMessage({ method: 'channel/ready', params: {} }, release);
  c.onMessage({ method: 'terminal/reset', params: { rows: 5, cols: 10 } }, release);
  assert.deepEqual(c.counts, { output: 2, outputChars: 7, resets: 2, previews: 0 });
});

test('a preview is drawn on the alternate screen and rendered before the snapshot, which is applied with rendering held', async () => {
  const t = await setup();
  let total = t.send('terminal/output', { data: 'old' });
  total += t.send('terminal/reset', { rows: 5, cols: 10, preview: 'END\x1b[1;4H' });
  total += t.send('terminal/output', { data: 'history\r\n' });
  total += t.send('terminal/output', { data: 'END' });
  total += t.send('channel/ready', {});
  total += t.send('terminal/output', { data: 'live' });
  t.term.flush();
  // Until a frame shows the preview, the snapshot waits, unreleased.
  assert.deepEqual(t.term.ops, ['write old', 'reset', 'resize 5x10', `write ${PREVIEW_BEFORE}END\x1b[1;4H`]);
  assert.deepEqual(t.events, ['size 5x10']);
  const early = credits(t.ws.take()).map((m) => m.params.consumedBytes);
  assert.ok(early.every((n) => n < total), `credited ${early} of ${total} before the preview was rendered`);
  t.term.render();
  t.term.flush();
  assert.deepEqual(t.term.ops.slice(4), ['render', `write ${PREVIEW_AFTER}`, 'write history\r\n', 'write END', `write ${PREVIEW_END}`, 'write live']);
  assert.deepEqual(t.events, ['size 5x10', 'ready']);
  assert.deepEqual(credits(t.ws.take()).map((m) => m.params.consumedBytes).at(-1), total);
});

test('a preview that is never rendered (a hidden page) holds the snapshot for at most PREVIEW_WAIT_MS', async () => {
  const t = await setup();
  t.send('terminal/reset', { rows: 5, cols: 10, preview: 'P' });
  t.send('terminal/output', { data: 'snap' });
  t.send('channel/ready', {});
  t.term.flush();
  assert.deepEqual(t.term.ops, ['reset', 'resize 5x10', `write ${PREVIEW_BEFORE}P`]);
  await new Promise((r) => setTimeout(r, PREVIEW_WAIT_MS + 50));
  t.term.flush();
  assert.deepEqual(t.term.ops.slice(3), [`write ${PREVIEW_AFTER}`, 'write snap', `write ${PREVIEW_END}`]);
  assert.deepEqual(t.events, ['size 5x10', 'ready']);
});

test('a second snapshot with a preview that comes while the first waits for its frame keeps stream order', async () => {
  const t = await setup();
  t.send('terminal/reset', { rows: 5, cols: 10, preview: 'A' });
  t.send('terminal/output', { data: 'a' });
  t.send('channel/ready', {});
  t.send('terminal/reset', { rows: 5, cols: 10, preview: 'B' });
  t.send('terminal/output', { data: 'b' });
  t.send('channel/ready', {});
  t.send('terminal/reset', { rows: 5, cols: 10 });
  t.send('terminal/output', { data: 'c' });
  t.send('channel/ready', {});
  t.term.flush();
  t.term.render();
  t.term.flush();
  t.term.render();
  t.term.flush();
  assert.deepEqual(t.term.ops.filter((o) => o !== 'render'), [
    'reset', 'resize 5x10', `write ${PREVIEW_BEFORE}A`, `write ${PREVIEW_AFTER}`, 'write a', `write ${PREVIEW_END}`,
    'reset', `write ${PREVIEW_BEFORE}B`, `write ${PREVIEW_AFTER}`, 'write b', `write ${PREVIEW_END}`,
    'reset', 'write c',
  ]);
  assert.deepEqual(t.events, ['size 5x10', 'ready', 'size 5x10', 'ready', 'size 5x10', 'ready']);
});

test('the preview sequences are the bytes docs/protocol-decisions.md and pty/preview_test.go name', () => {
  assert.equal(PREVIEW_BEFORE, '\x1b[?1047h\x1b[H');
  assert.equal(PREVIEW_AFTER, '\x1b[?2026h\x1b[?1047l\x1b[H\x1b[?25h');
  assert.equal(PREVIEW_END, '\x1b[?2026l');
});

// direct drives a consumer without a session: messages of subscription
// sub, each with a release that records it.
function direct() {
  const term = new FakeTerm();
  const events = [];
  const c = terminalConsumer(term, { onReady: () => events.push('ready'), onExit: () => events.push('exit') });
  const released = [];
  const send = (sub, method, params, name = method) => c.onMessage({ method, params }, () => released.push(name), sub);
  return { term, c, events, released, send };
}

test('a subscription that ends while its preview waits: what it left is released unapplied, the wait ends, the next snapshot applies', () => {
  const t = direct();
  const a = {}, b = {};
  t.send(a, 'terminal/reset', { rows: 5, cols: 10, preview: 'A' });
  t.send(a, 'terminal/output', { data: 'old' }, 'old');
  t.send(a, 'channel/ready', {});
  t.term.flush();
  assert.equal(t.c.holding(), true);
  t.c.end(a);
  assert.equal(t.c.holding(), false);
  assert.deepEqual(t.released, ['terminal/reset', 'old', 'channel/ready']);
  t.term.render(); // the cancelled wait writes nothing
  t.send(b, 'terminal/reset', { rows: 5, cols: 10 });
  t.send(b, 'terminal/output', { data: 'new' }, 'new');
  t.send(b, 'channel/ready', {});
  t.term.flush();
  assert.deepEqual(t.term.ops.filter((o) => o !== 'render'),
    ['reset', 'resize 5x10', `write ${PREVIEW_BEFORE}A`, 'reset', 'write new']);
  assert.deepEqual(t.events, ['ready'], 'only the live subscription\'s channel/ready reaches the view');
});

test('a subscription that ends while its snapshot is applied behind a preview resumes rendering', () => {
  const t = direct();
  const a = {};
  t.send(a, 'terminal/reset', { rows: 5, cols: 10, preview: 'A' });
  t.term.flush();
  t.term.render();
  t.send(a, 'terminal/output', { data: 'part' }, 'part');
  assert.equal(t.c.holding(), true);
  t.c.end({}); // another subscription's end changes nothing
  assert.equal(t.c.holding(), true);
  t.c.end(a);
  t.term.flush();
  assert.equal(t.c.holding(), false);
  assert.deepEqual(t.term.ops.slice(-3), [`write ${PREVIEW_AFTER}`, 'write part', `write ${PREVIEW_END}`]);
});

test('a held message that throws is released and the rest still apply', () => {
  const t = direct();
  const a = {};
  t.send(a, 'terminal/reset', { rows: 5, cols: 10, preview: 'A' });
  t.c.onMessage({ method: 'terminal/output' }, () => t.released.push('bad'), a); // no params: throws when applied
  t.send(a, 'terminal/output', { data: 'ok' }, 'ok');
  t.send(a, 'channel/ready', {});
  const logged = [];
  const error = console.error;
  console.error = (...args) => logged.push(args.join(' '));
  try {
    t.term.flush();
    t.term.render();
    t.term.flush();
  } finally {
    console.error = error;
  }
  assert.ok(t.released.includes('bad'), 'the message that threw was released');
  assert.ok(t.released.includes('ok') && t.released.includes('channel/ready'));
  assert.equal(logged.length, 1);
  assert.deepEqual(t.events, ['ready']);
  assert.equal(t.c.holding(), false);
});

test('while a preview waits for its frame, what is held is bounded by the window: none of it is credited', async () => {
  const receive = { windowBytes: 16384, maximumFrameBytes: 16384, maximumMessageBytes: 16384 };
  const t = await setup(receive);
  const line = 'y\r\n'.repeat(500);
  // A host that sends whenever the window allows, to a page whose preview
  // is never drawn within the test (no render): it runs out of window, and
  // the held messages are at most a window of output.
  const reset = t.send('terminal/reset', { rows: 5, cols: 10, preview: 'P' });
  let sent = reset;
  let hostConsumed = 0;
  for (let turn = 0; turn < 50; turn++) {
    while (sent - hostConsumed < receive.windowBytes) sent += t.send('terminal/output', { data: line });
    t.term.flush();
    for (const m of credits(t.ws.take())) hostConsumed = m.params.consumedBytes;
  }
  assert.ok(sent - reset < receive.windowBytes + receive.maximumMessageBytes,
    `the host could send ${sent - reset} bytes of output behind the preview (${hostConsumed} credited): more than a window held`);
  assert.ok(!t.term.ops.includes(`write ${line}`), 'held output was written before the preview\'s frame');
  t.term.render();
  t.term.flush();
  for (const m of credits(t.ws.take())) hostConsumed = m.params.consumedBytes;
  assert.equal(hostConsumed, sent, 'everything held is credited once it is applied');
});
