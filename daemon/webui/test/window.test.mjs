// Adaptive windows in the page (PROTOCOL.md §6, "Changing a window"):
// tune.js's rules, and a subscription that announces its tuned window with
// channel/window and takes the host's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WindowTuner } from '../src/tune.js';
import { CHANNEL, collector, connect, logical, sendMessage, subscribe } from './harness.mjs';

// step models a path: propagation rtt (ms), a bottleneck of rate bytes/ms,
// and a queue holding what the window puts in flight beyond rate × rtt.
// path.batched: the consumer's credit goes per quarter window, so an
// eighth of the window is released and not yet credited on average and
// 7/8 of it is in flight; else (releases announced at once) all of it.
function step(path, w, dt) {
  if (path.batched) w = w * 7 / 8;
  const bdp = path.rate * path.rtt;
  const queue = Math.max(w - bdp, 0);
  const rtt = path.rtt + queue / path.rate;
  const thr = Math.min(w / rtt, path.rate);
  return { delivered: thr * dt, rtt };
}

test('tune.js fits the window to the path: ≥ 90 % of the rate, a queue under 8 ms', () => {
  for (const path of [{ rate: 33e3, rtt: 200 }, { rate: 33e3, rtt: 80 }, { rate: 67e3, rtt: 20 }, { rate: 5e3, rtt: 50 },
    { rate: 33e3, rtt: 200, batched: true }, { rate: 33e3, rtt: 80, batched: true }]) {
    for (const initial of [256 * 1024, 32 << 20]) {
      const tu = new WindowTuner({ floor: 256 * 1024, ceiling: 64 << 20 }, initial);
      let now = 0;
      tu.onRtt(now, path.rtt); // the first ping precedes the stream's bytes
      let lastPing = 0;
      let lastRtt = path.rtt;
      let tail = 0;
      const total = 45000;
      for (; now < total; now += 1) {
        const { delivered, rtt } = step(path, tu.window, 1);
        if (now - lastPing >= Math.max(lastRtt, 10)) {
          tu.onRtt(now, rtt);
          lastPing = now;
          lastRtt = rtt;
        }
        tu.noteHeld(path.batched ? tu.window / 8 : 0);
        tu.onRelease(now, delivered);
        assert.ok(tu.window >= 256 * 1024 && tu.window <= 64 << 20);
        if (now >= total - 2000) tail += delivered;
      }
      const thr = tail / 2000;
      const { rtt } = step(path, tu.window, 1);
      assert.ok(thr >= 0.9 * path.rate, `${JSON.stringify(path)} from ${initial}: ${thr} B/ms`);
      assert.ok(rtt - path.rtt <= 9, `${JSON.stringify(path)} from ${initial}: queue ${rtt - path.rtt} ms`);
    }
  }
});

test('tune.js slow start overshoots the path once, by one doubling at most, with real feedback', () => {
  // A window reaches the sender half a round trip after it is announced,
  // and a ping reports the queue of the moment it went out.
  for (const rttMs of [20, 80, 200]) {
    const path = { rate: 25e3, rtt: rttMs };
    const bdp = path.rate * path.rtt;
    const tu = new WindowTuner({ floor: 128 * 1024, ceiling: 64 << 20 }, 512 * 1024);
    tu.onRtt(0, rttMs);
    const windows = [];
    let ping = null; // {sent, rtt}
    let nextPing = 0;
    let peak = 0;
    for (let now = 1; now < 10000; now++) {
      windows.push(tu.window);
      const w = windows[Math.max(0, windows.length - 1 - Math.floor(rttMs / 2))];
      const { delivered, rtt } = step(path, w, 1);
      peak = Math.max(peak, tu.window);
      if (ping === null && now >= nextPing) ping = { sent: now, rtt };
      if (ping !== null && now >= ping.sent + ping.rtt) {
        tu.onRtt(now, ping.rtt);
        nextPing = now + Math.max(Math.max(tu.rtt, 10) - ping.rtt, 0);
        ping = null;
      }
      tu.noteHeld(0);
      tu.onRelease(now, delivered);
    }
    assert.ok(peak <= 2.5 * bdp, `${rttMs} ms: slow start reached ${(peak / bdp).toFixed(2)} × the path's product`);
  }
});

test('tune.js: after a drain the window comes back by what is released, not at once', () => {
  const tu = new WindowTuner({ floor: 64 * 1024, ceiling: 8 << 20, minRttLifetimeMs: 1000 }, 4 << 20);
  tu.onRtt(0, 10);
  tu.onRelease(1090, 0);
  tu.onRtt(1100, 10); // a new lifetime: a drain is due
  assert.equal(tu.onRelease(1100, 1 << 20), 2 << 20, 'the drain halves');
  assert.equal(tu.onRelease(1111, 1 << 20), null, 'one epoch into the drain');
  assert.equal(tu.onRelease(1122, 1 << 20), null, 'the drain is over, and the window does not jump back');
  // 16 KiB every 0.1 ms: back over two round trips (20 ms), never by more
  // than was released.
  let w = tu.window;
  let released = 0;
  let done = 0;
  for (let i = 0; tu.window < 4 << 20; i++) {
    assert.ok(i < 10000, `not restored: ${tu.window}`);
    released += 16 * 1024;
    const next = tu.onRelease(1122 + i * 0.1, 16 * 1024);
    if (next !== null) {
      assert.ok(next - w <= released, `${w} → ${next} on ${released} released`);
      w = next;
      released = 0;
      done = i * 0.1;
    }
  }
  assert.ok(done >= 18 && done <= 25, `restored in ${done} ms, want about 20`);
  assert.equal(tu.window, 4 << 20);
});

test('tune.js grows through round trips noisier than its queue target', () => {
  const path = { rate: 33e3, rtt: 200 };
  for (const initial of [256 * 1024, 32 << 20]) {
    const tu = new WindowTuner({ floor: 128 * 1024, ceiling: 64 << 20 }, initial);
    tu.onRtt(0, path.rtt);
    let lastPing = 0;
    let lastRtt = path.rtt;
    let seed = 1;
    const noise = () => { // deterministic, up to 20 ms
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return (seed / 2147483648) * 20;
    };
    let tail = 0;
    for (let now = 1; now < 30000; now++) {
      const { delivered, rtt } = step(path, tu.window, 1);
      if (now - lastPing >= Math.max(lastRtt, 10)) {
        tu.onRtt(now, rtt + noise());
        lastPing = now;
        lastRtt = rtt;
      }
      tu.onRelease(now, delivered);
      if (now >= 20000) tail += delivered;
    }
    assert.ok(tail / 10000 >= 0.85 * path.rate, `from ${initial}: ${tail / 10000} B/ms`);
  }
});

test('tune.js: no sample, no change; a pause says nothing; a queue shrinks to the product', () => {
  const tu = new WindowTuner({ floor: 64 * 1024, ceiling: 8 << 20 }, 64 * 1024);
  for (let i = 0; i < 100; i++) assert.equal(tu.onRelease(i * 10, 1 << 20), null);
  tu.onRtt(1000, 10);
  tu.onRelease(1000, 0);
  assert.equal(tu.onRelease(1500, 64 * 1024), null, 'after a pause');
  assert.equal(tu.onRelease(1510, 64 * 1024), 128 * 1024, 'slow start doubles');

  const big = new WindowTuner({ floor: 64 * 1024, ceiling: 8 << 20 }, 8 << 20);
  big.onRtt(0, 10);
  for (let i = 1; i <= 20; i++) big.onRtt(i, 100);
  big.onRelease(100, 0);
  const w = big.onRelease(200, 1e6); // 10 MB/s × (10 + 4) ms
  assert.ok(w > 135000 && w < 145000, `window ${w}`);
});

class FakeMeter {
  constructor() {
    this.srtt = null;
    this.latest = null;
    this.stopped = false;
    this.busyWho = new Set();
    this._cbs = new Set();
  }
  onSample(cb) {
    this._cbs.add(cb);
    return () => this._cbs.delete(cb);
  }
  busy(on, who) {
    if (on) this.busyWho.add(who);
    else this.busyWho.delete(who);
  }
  fire(rtt) {
    this.srtt = this.latest = rtt;
    for (const cb of this._cbs) cb({ rtt, srtt: rtt, min: rtt });
  }
}

test('a subscription grows its window with channel/window and takes the host\'s', async () => {
  const ctx = await connect();
  const { session, ws } = ctx;
  let now = 0;
  session._now = () => now;
  const meter = new FakeMeter();
  session.rtt = meter;
  const c = collector({ auto: true });
  const receive = { windowBytes: 64 * 1024, maximumFrameBytes: 16 * 1024, maximumMessageBytes: 64 * 1024 };
  const { sub } = await subscribe(ctx, { consumer: c, receive });
  meter.fire(20);
  let id = 1;
  let sentBytes = 0;
  const windows = [];
  // Each round trip the host sends a full window and the page releases it.
  for (let round = 0; round < 4; round++) {
    now += 20;
    meter.fire(20); // each growth waits for a round trip measured after the last
    const target = sentBytes + sub.window;
    while (sentBytes < target) {
      const text = logical('terminal/output', { data: 'x'.repeat(4000) });
      const cuts = [];
      for (let at = 4000; at < text.length; at += 4000) cuts.push(at);
      sendMessage(ws, id++, text, cuts);
      sentBytes += text.length * 2;
    }
    for (const m of ws.take()) {
      if (m.method === 'channel/window') windows.push(m.params);
    }
  }
  assert.ok(c.ends.length === 0, `the subscription ended: ${JSON.stringify(c.ends)}`);
  assert.ok(windows.length >= 2, `channel/window sent: ${JSON.stringify(windows)}`);
  assert.deepEqual(windows[0], { channel: CHANNEL, subscriptionId: 's1', windowBytes: 128 * 1024 });
  assert.equal(windows[1].windowBytes, 256 * 1024);
  assert.equal(sub.window, windows[windows.length - 1].windowBytes);
  assert.equal(sub.stats.windowChanges, windows.length);
  assert.ok(meter.busyWho.has('s1'), 'asks the meter for frequent samples while data flows');

  // The host's window for client→host data.
  ws.recv({ jsonrpc: '2.0', method: 'channel/window', params: { channel: CHANNEL, subscriptionId: 's1', windowBytes: 1 << 20 } });
  assert.equal(sub._tx.limits.windowBytes, 1 << 20);
  ws.recv({ jsonrpc: '2.0', method: 'channel/window', params: { channel: CHANNEL, subscriptionId: 's1', windowBytes: 10 } });
  assert.equal(sub._tx.limits.windowBytes, 1 << 20, 'a window below one frame is ignored');

  ws.hostClose(1000);
  assert.ok(!meter.busyWho.has('s1'), 'an ended subscription stops asking for samples');
});

test('without a meter (a host without ping) the window stays as granted', async () => {
  const ctx = await connect();
  const c = collector({ auto: true });
  const receive = { windowBytes: 64 * 1024, maximumFrameBytes: 16 * 1024, maximumMessageBytes: 64 * 1024 };
  const { sub } = await subscribe(ctx, { consumer: c, receive });
  assert.equal(ctx.session.rtt, null);
  for (let i = 1; i <= 20; i++) sendMessage(ctx.ws, i, logical('terminal/output', { data: 'y'.repeat(1000) }));
  assert.equal(ctx.ws.take().filter((m) => m.method === 'channel/window').length, 0);
  assert.equal(sub.window, 64 * 1024);
});
