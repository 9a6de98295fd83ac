// The round-trip meter (rtt.js): ping pacing, srtt, windowed minimum, stop.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRttMeter, IDLE_INTERVAL_MS, RttMeter, takesPing } from '../src/rtt.js';
import { FakeClock } from './harness.mjs';

// FakeSession records pings; the test answers them.
class FakeSession {
  constructor(windowUpdates = true) {
    this.initializeResult = { capabilities: { windowUpdates } };
    this.pings = []; // {at, resolve, reject}
    this.closeFns = new Set();
    this.closed = false;
    this.clock = null;
  }
  request(method, params) {
    assert.equal(method, 'ping');
    assert.deepEqual(params, {});
    return new Promise((resolve, reject) => this.pings.push({ at: this.clock.t, resolve, reject }));
  }
  on(ev, fn) {
    assert.equal(ev, 'close');
    this.closeFns.add(fn);
    return () => this.closeFns.delete(fn);
  }
  close() {
    this.closed = true;
    for (const p of this.pings.splice(0)) p.reject(new Error('closed'));
    for (const fn of [...this.closeFns]) fn({ code: 1000 });
  }
}

const flush = () => new Promise((r) => setImmediate(r));

function setup(opts = {}) {
  const clock = new FakeClock(1000);
  const session = new FakeSession(opts.windowUpdates ?? true);
  session.clock = clock;
  const meter = createRttMeter(session, { now: clock.now, setTimeout: clock.setTimeout, clearTimeout: clock.clearTimeout, ...opts.meter });
  return { clock, session, meter };
}

// answer answers the outstanding ping after rtt ms.
async function answer(clock, session, rtt) {
  assert.equal(session.pings.length, 1, 'one ping outstanding');
  clock.advance(rtt);
  session.pings.shift().resolve({});
  await flush();
}

test('no meter for a host without ping (no capabilities.windowUpdates)', () => {
  const { meter, session } = setup({ windowUpdates: false });
  assert.equal(meter, null);
  assert.equal(session.pings.length, 0);
  assert.equal(takesPing({ initializeResult: {} }), false);
  assert.equal(takesPing(null), false);
});

test('pacing: idle every 2 s from the previous send; srtt EWMA; min', async () => {
  const { clock, session, meter } = setup();
  const samples = [];
  meter.onSample((s) => samples.push(s));
  assert.equal(session.pings.length, 1, 'the first ping goes out at once');
  await answer(clock, session, 200);
  assert.equal(meter.srtt, 200, 'the first sample sets srtt');
  assert.equal(meter.min, 200);
  assert.equal(session.pings.length, 0);
  clock.advance(IDLE_INTERVAL_MS - 200 - 1);
  assert.equal(session.pings.length, 0, 'not before 2 s after the last send');
  clock.advance(1);
  assert.equal(session.pings.length, 1);
  await answer(clock, session, 100);
  assert.equal(meter.srtt, 200 + (100 - 200) / 4, `srtt = ${meter.srtt}, want 175`);
  assert.equal(meter.min, 100);
  assert.equal(meter.latest, 100);
  assert.deepEqual(samples.map((s) => s.rtt), [200, 100]);
  assert.deepEqual(samples[1], { rtt: 100, srtt: 175, min: 100 });
});

test('at most one ping outstanding, however long it takes', async () => {
  const { clock, session, meter } = setup();
  meter.busy(true);
  clock.advance(30000);
  assert.equal(session.pings.length, 1);
  await answer(clock, session, 0);
  assert.equal(meter.srtt, 30000);
});

test('busy: every max(srtt, 50 ms); asking brings an idle ping forward', async () => {
  const { clock, session, meter } = setup();
  await answer(clock, session, 20); // srtt 20: the busy interval is 50 ms
  clock.advance(500);
  assert.equal(session.pings.length, 0, 'idle: nothing for 2 s');
  meter.busy(true, 'typing');
  assert.equal(session.pings.length, 0, 'brought forward to a timer, not sent inline');
  clock.advance(0);
  assert.equal(session.pings.length, 1, 'more than 50 ms since the last send: at once');
  await answer(clock, session, 20);
  clock.advance(29);
  assert.equal(session.pings.length, 0);
  clock.advance(1);
  assert.equal(session.pings.length, 1, '50 ms after the previous send');
  // A long round trip paces by srtt.
  await answer(clock, session, 400); // srtt = 20 + (400-20)/4 = 115
  assert.equal(meter.srtt, 115);
  clock.advance(0);
  assert.equal(session.pings.length, 1, 'srtt after the previous send, which went out 400 ms ago: at once');
  await answer(clock, session, 100); // srtt = 115 + (100-115)/4 = 111.25
  clock.advance(111.25 - 100 - 1);
  assert.equal(session.pings.length, 0);
  clock.advance(1);
  assert.equal(session.pings.length, 1, 'srtt (111 ms) after the previous send');
  await answer(clock, session, 100);
  // Two users: busy until both let go.
  meter.busy(true, 'window');
  meter.busy(false, 'typing');
  assert.equal(meter.isBusy, true);
  meter.busy(false, 'window');
  assert.equal(meter.isBusy, false);
  clock.advance(1000);
  assert.equal(session.pings.length, 0, 'idle again: 2 s');
  clock.advance(1000);
  assert.equal(session.pings.length, 1);
});

test('the minimum is windowed: an old low sample ages out after 10 s', async () => {
  const { clock, session, meter } = setup({ meter: { minWindowMs: 10000 } });
  await answer(clock, session, 10);
  for (let i = 0; i < 6; i++) {
    for (let j = 0; j < IDLE_INTERVAL_MS && session.pings.length === 0; j++) clock.advance(1);
    await answer(clock, session, 100);
  }
  assert.equal(meter.min, 100, `min = ${meter.min} after the 10 ms sample aged out, want 100`);
  assert.ok(meter._mins.length <= 2, `deque holds ${meter._mins.length}`);
});

test('the minimum deque stays bounded with many equal samples', async () => {
  const { clock, session, meter } = setup({ meter: { minWindowMs: 1e9 } });
  meter.busy(true);
  for (let i = 0; i < 600; i++) {
    await answer(clock, session, 50 + (i % 3)); // increasing runs: the deque grows, bounded
    clock.advance(50);
  }
  assert.ok(meter._mins.length <= 256, `deque holds ${meter._mins.length}`);
  assert.ok(meter.min >= 50);
});

test('the meter stops when the session closes, and after an error answer', async () => {
  const { clock, session, meter } = setup();
  let n = 0;
  meter.onSample(() => n++);
  session.close();
  await flush();
  assert.equal(meter.stopped, true);
  clock.advance(10000);
  assert.equal(session.pings.length, 0);
  assert.equal(clock.timers.size, 0, 'no timer left');
  assert.equal(n, 0);

  const s2 = setup();
  s2.session.pings.shift().reject(Object.assign(new Error('method not found'), { code: -32601 }));
  await flush();
  assert.equal(s2.meter.stopped, true);
  s2.clock.advance(10000);
  assert.equal(s2.session.pings.length, 0);
  s2.meter.busy(true);
  assert.equal(s2.clock.timers.size, 0);
});

test('stop cancels the timer; a late answer is not a sample', async () => {
  const clock = new FakeClock(1000);
  const session = new FakeSession();
  session.clock = clock;
  const meter = new RttMeter(session, { now: clock.now, setTimeout: clock.setTimeout, clearTimeout: clock.clearTimeout });
  meter.start();
  let n = 0;
  meter.onSample(() => n++);
  meter.stop();
  session.pings.shift().resolve({});
  await flush();
  assert.equal(n, 0);
  assert.equal(meter.samples, 0);
  assert.equal(clock.timers.size, 0);
  assert.equal(session.closeFns.size, 0, 'the close listener is removed');
});
