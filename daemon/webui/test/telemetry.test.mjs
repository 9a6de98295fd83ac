// Telemetry on the page: the bounded store (ring buffers, charts, gaps from
// telemetry/dropped) and the consumer that releases credit only after the
// animation frame that drew a batch (PROTOCOL.md §5, §8).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Chart, RingBuffer, TelemetryModel, seriesKey } from '../src/telemetry-store.js';
import { TELEMETRY_RECEIVE, telemetryConsumer } from '../src/telemetry-stream.js';
import { findProcessChannel } from '../src/process-status.js';
import { bytes, formatterFor, number, percent } from '../src/format.js';
import { connect, credits, logical, sendMessage, subscribe } from './harness.mjs';

const TEL = 'ahp-telemetry:/t1';

const samples = (seq, list) => ({ method: 'telemetry/samples', params: { seq, samples: list } });
const dropped = (fromSeq, toSeq, count) => ({ method: 'telemetry/dropped', params: { fromSeq, toSeq, count } });

// ---- ring buffer --------------------------------------------------------------

test('ring buffer: holds the newest capacity values, oldest first', () => {
  const r = new RingBuffer(4);
  assert.deepEqual(r.copyTo([]), []);
  for (let i = 1; i <= 3; i++) r.push(i);
  assert.deepEqual(r.copyTo([]), [1, 2, 3]);
  assert.equal(r.push(4), undefined);
  assert.equal(r.push(5), 1, 'a full ring returns the value it overwrote');
  assert.deepEqual(r.copyTo([]), [2, 3, 4, 5]);
  assert.equal(r.length, 4);
  assert.equal(r.get(0), 2);
  assert.equal(r.last(), 5);
  r.set(0, 20);
  assert.deepEqual(r.copyTo([]), [20, 3, 4, 5]);
  assert.throws(() => r.set(4, 0), RangeError);
  assert.throws(() => new RingBuffer(0), RangeError);
});

test('ring buffer: the bound holds for a million pushes; copyTo reuses its array', () => {
  const r = new RingBuffer(1000);
  const out = [];
  for (let i = 0; i < 1_000_000; i++) r.push(i);
  assert.equal(r.length, 1000);
  assert.equal(r._slots.length, 1000, 'storage never grows');
  assert.equal(r.copyTo(out), out);
  assert.equal(out.length, 1000);
  assert.equal(out[0], 999_000);
  assert.equal(out[999], 999_999);
});

test('chart: rows are bounded by capacity whatever the rate and series count', () => {
  const m = new TelemetryModel({ capacity: 100, maxSeries: 3, maxCharts: 2 });
  let seq = 0;
  // 10 minutes at 1,000 samples/s: 600 batches of 1000 samples, 5 series
  // of one name sharing each tick's time, plus names beyond maxCharts.
  for (let b = 0; b < 600; b++) {
    const list = [];
    for (let i = 0; i < 200; i++) {
      const t = b * 1000 + i * 5;
      for (const ph of ['a', 'b', 'c', 'd', 'e']) list.push({ t, name: 'wave', value: i, labels: { phase: ph } });
    }
    list.push({ t: b * 1000, name: 'other', value: 1 }, { t: b * 1000, name: 'third', value: 1 });
    m.apply(samples(++seq, list));
  }
  const c = m.chart('wave');
  assert.equal(c.points, 100);
  assert.equal(c._xs.length, 100, 'storage never grows');
  assert.equal(c.series.length, 3, 'maxSeries series kept');
  assert.deepEqual([...c.hiddenSeries].sort(), ['phase=d', 'phase=e']);
  for (const s of c.series) assert.equal(s.v.length, 100);
  assert.equal(m.charts.size, 2);
  assert.deepEqual([...m.hiddenCharts], ['third']);
  const d = c.data();
  assert.equal(d.length, 4);
  for (const col of d) assert.equal(col.length, 100);
  // Ascending times, as uPlot needs.
  for (let i = 1; i < d[0].length; i++) assert.ok(d[0][i] >= d[0][i - 1]);
  assert.equal(m.stats.samples, 600 * 1002);
});

test('chart: series of one time share a row; a new series has no values before it', () => {
  const c = new Chart('cpu', { capacity: 10 });
  c.add(1000, 0.5, { cpu: '0' });
  c.add(1000, 0.25, { cpu: '1' });
  c.add(2000, 0.75, { cpu: '0' });
  c.add(2000, 0.5, { cpu: '1' });
  c.add(3000, 0.1, { cpu: '2' });
  assert.deepEqual(c.data(), [[1000, 2000, 3000], [0.5, 0.75, undefined], [0.25, 0.5, undefined], [undefined, undefined, 0.1]]);
  assert.deepEqual(c.series.map((s) => s.label), ['cpu=0', 'cpu=1', 'cpu=2']);
  // A time going back is taken as the newest held (uPlot needs ascending x).
  c.add(2500, 0.2, { cpu: '0' });
  assert.deepEqual(c.data()[0], [1000, 2000, 3000]);
  assert.equal(c.data()[1][2], 0.2);
  assert.equal(seriesKey({ b: '2', a: '1' }), 'a=1,b=2');
  assert.equal(new Chart('x').add(1, 1) && true, true);
});

// ---- gaps from telemetry/dropped -------------------------------------------------

test('telemetry/dropped: a null row in every chart between the last point and the next, and the loss counted', () => {
  const m = new TelemetryModel({ capacity: 50 });
  m.apply(samples(1, [{ t: 1000, name: 'a', value: 1 }, { t: 1000, name: 'b', value: 10, labels: { k: 'x' } }]));
  m.apply(samples(2, [{ t: 2000, name: 'a', value: 2 }, { t: 2000, name: 'b', value: 20, labels: { k: 'x' } }]));
  assert.equal(m.apply(dropped(3, 7, 42)), true);
  assert.deepEqual(m.stats, {
    batches: 2, samples: 4, liveSamples: 0, droppedMessages: 1, droppedBatches: 5, lostSamples: 42, gaps: 1,
    duplicateBatches: 0, invalidSamples: 0, ready: false,
  });
  assert.equal(m.lastSeq, 7, 'toSeq is inclusive');
  m.apply(samples(8, [{ t: 9000, name: 'a', value: 9 }, { t: 9000, name: 'b', value: 90, labels: { k: 'x' } }]));
  const a = m.chart('a').data();
  assert.deepEqual(a, [[1000, 2000, 5500, 9000], [1, 2, null, 9]]);
  assert.deepEqual(m.chart('b').data(), [[1000, 2000, 5500, 9000], [10, 20, null, 90]]);
  assert.deepEqual(m.chart('a').visibleGaps(), [{ from: 2000, to: 9000, count: 42 }]);
  // Only one null row per gap, however many samples follow.
  m.apply(samples(9, [{ t: 9500, name: 'a', value: 9.5 }]));
  assert.deepEqual(m.chart('a').data()[1], [1, 2, null, 9, 9.5]);
  // A series first seen after a gap has null at the gap row too (its line
  // cannot bridge it) and undefined elsewhere.
  m.apply(samples(10, [{ t: 9500, name: 'a', value: 1, labels: { k: 'new' } }]));
  assert.deepEqual(m.chart('a').data()[2], [undefined, undefined, null, undefined, 1]);
});

test('telemetry/dropped: gaps scroll out with their rows; the counters keep the total', () => {
  const m = new TelemetryModel({ capacity: 4 });
  let seq = 0;
  m.apply(samples(++seq, [{ t: 1, name: 'a', value: 1 }]));
  m.apply(dropped(++seq, seq, 3));
  for (let i = 2; i <= 3; i++) m.apply(samples(++seq, [{ t: i * 10, name: 'a', value: i }]));
  assert.equal(m.chart('a').visibleGaps().length, 1);
  for (let i = 4; i <= 10; i++) m.apply(samples(++seq, [{ t: i * 10, name: 'a', value: i }]));
  assert.equal(m.chart('a').visibleGaps().length, 0);
  assert.ok(!m.chart('a').data()[1].includes(null));
  assert.equal(m.stats.lostSamples, 3);
  assert.equal(m.stats.gaps, 1);
});

test('seq: replayed batches after a reconnect are skipped; a jump is a gap', () => {
  const m = new TelemetryModel();
  m.apply(samples(5, [{ t: 100, name: 'a', value: 1 }]));
  m.apply(samples(6, [{ t: 200, name: 'a', value: 2 }]));
  assert.equal(m.apply(samples(6, [{ t: 200, name: 'a', value: 2 }])), false);
  assert.equal(m.stats.duplicateBatches, 1);
  m.apply(samples(10, [{ t: 900, name: 'a', value: 3 }]));
  assert.equal(m.stats.droppedBatches, 3);
  assert.equal(m.stats.gaps, 1);
  assert.deepEqual(m.chart('a').data()[1], [1, 2, null, 3]);
  // Invalid samples are counted and skipped.
  m.apply(samples(11, [{ t: 1000, name: 'a', value: 'x' }, { name: 'a', value: 1 }, null]));
  assert.equal(m.stats.invalidSamples, 3);
});

// ---- credit after the frame that drew it ----------------------------------------

// FakeFrames is requestAnimationFrame under the test's control.
class FakeFrames {
  constructor() {
    this.queue = [];
  }
  request = (fn) => {
    this.queue.push(fn);
  };
  run() {
    const q = this.queue;
    this.queue = [];
    for (const fn of q) fn(0);
    return q.length;
  }
}

async function telemetrySetup(receive = TELEMETRY_RECEIVE) {
  const ctx = await connect();
  const frames = new FakeFrames();
  const model = new TelemetryModel({ capacity: 100 });
  const events = [];
  const consumer = telemetryConsumer({
    model,
    requestFrame: frames.request,
    draw: (changed) => events.push(`draw ${changed} ${model.stats.samples}`),
    onReady: () => events.push('ready'),
  });
  const { sub } = await subscribe(ctx, { consumer, channel: TEL, receive });
  return { ...ctx, frames, model, events, consumer, sub };
}

function sendTel(t, id, method, params, cuts = []) {
  const text = logical(method, params);
  sendMessage(t.ws, id, text, cuts, { channel: TEL });
  return text.length * 2;
}

test('credit: released only after the animation frame that drew the batch', async () => {
  const t = await telemetrySetup();
  const n1 = sendTel(t, 1, 'telemetry/samples', { seq: 1, samples: [{ t: 1, name: 'a', value: 1 }] });
  const n2 = sendTel(t, 2, 'telemetry/samples', { seq: 2, samples: [{ t: 2, name: 'a', value: 2 }] });
  // Arrived and parsed, but not drawn: no credit, nothing applied yet.
  assert.deepEqual(credits(t.ws.take()), []);
  assert.equal(t.model.stats.samples, 0);
  assert.equal(t.consumer.pending, 2);
  assert.equal(t.frames.queue.length, 1, 'one frame requested for both');
  assert.equal(t.sub.receiveState().releasedBytes, 0);
  t.frames.run();
  assert.deepEqual(t.events, ['draw true 2']);
  const c = credits(t.ws.take());
  assert.equal(c.length, 1);
  assert.equal(c[0].params.consumedBytes, n1 + n2);
  assert.equal(c[0].params.channel, TEL);
  assert.equal(t.consumer.pending, 0);
  // channel/ready is released after its frame too, then reported.
  const n3 = sendTel(t, 3, 'channel/ready', {});
  assert.deepEqual(credits(t.ws.take()), []);
  t.frames.run();
  assert.deepEqual(t.events, ['draw true 2', 'draw false 2', 'ready']);
  assert.equal(credits(t.ws.take())[0].params.consumedBytes, n1 + n2 + n3);
});

test('credit: a page that draws no frame (hidden tab) credits nothing and holds at most its window', async () => {
  const receive = { windowBytes: 8192, maximumFrameBytes: 4096, maximumMessageBytes: 8192 };
  const t = await telemetrySetup(receive);
  const list = Array.from({ length: 10 }, (_, i) => ({ t: i, name: 'cpu', value: i / 10, labels: { cpu: String(i) } }));
  let sent = 0;
  let id = 1;
  // The host may start messages only while outstanding < window (§5).
  while (sent < receive.windowBytes) sent += sendTel(t, id, 'telemetry/samples', { seq: id++, samples: list });
  assert.deepEqual(credits(t.ws.take()), []);
  // One more message beyond the window is a protocol error (the host broke §5).
  sendTel(t, id, 'telemetry/samples', { seq: id, samples: list });
  const [reset] = t.ws.take().filter((m) => m.method === 'channel/reset');
  assert.equal(reset.params.code, 'protocol-error');
  assert.equal(t.model.stats.samples, 0, 'nothing drawn without a frame');
});

test('credit: pause withholds it (test hook) and resume draws and releases', async () => {
  const t = await telemetrySetup();
  t.consumer.pause();
  const n = sendTel(t, 1, 'telemetry/samples', { seq: 1, samples: [{ t: 1, name: 'a', value: 1 }] });
  assert.equal(t.frames.run(), 0);
  assert.deepEqual(credits(t.ws.take()), []);
  t.consumer.resume();
  t.frames.run();
  assert.equal(credits(t.ws.take())[0].params.consumedBytes, n);
});

test('credit: a throwing draw still releases (never wedges the window)', async () => {
  const ctx = await connect();
  const frames = new FakeFrames();
  const consumer = telemetryConsumer({
    model: new TelemetryModel(),
    requestFrame: frames.request,
    draw: () => {
      throw new Error('canvas gone');
    },
  });
  await subscribe(ctx, { consumer, channel: TEL });
  const n = sendTel(ctx, 1, 'telemetry/samples', { seq: 1, samples: [{ t: 1, name: 'a', value: 1 }] });
  assert.throws(() => frames.run(), /canvas gone/);
  assert.equal(credits(ctx.ws.take())[0].params.consumedBytes, n);
});

// ---- fragmented telemetry messages -------------------------------------------------

test('fragments: a telemetry/samples message cut into many frames is reassembled whole', async () => {
  const t = await telemetrySetup();
  const list = Array.from({ length: 200 }, (_, i) => ({ t: 1000 + i, name: 'system_load1', value: i * 0.01, labels: { host: 'h\u00e9\u65e5' } }));
  const text = logical('telemetry/samples', { seq: 1, samples: list });
  const cuts = [];
  for (let at = 997; at < text.length; at += 997) cuts.push(at);
  assert.ok(cuts.length > 5);
  sendMessage(t.ws, 1, text, cuts, { channel: TEL });
  const d = sendTel(t, 2, 'telemetry/dropped', { fromSeq: 2, toSeq: 4, count: 600 }, [10, 20]);
  sendTel(t, 3, 'telemetry/samples', { seq: 5, samples: [{ t: 5000, name: 'system_load1', value: 1, labels: { host: 'h\u00e9\u65e5' } }] });
  assert.equal(t.model.stats.samples, 0);
  t.frames.run();
  assert.equal(t.model.stats.samples, 201);
  assert.equal(t.model.stats.lostSamples, 600);
  const c = t.model.chart('system_load1');
  assert.equal(c.series[0].label, 'host=h\u00e9\u65e5');
  assert.equal(c.points, 100, 'capacity rows');
  assert.equal(c.data()[1].filter((v) => v === null).length, 1);
  const cs = credits(t.ws.take());
  assert.ok(d > 0);
  assert.equal(cs.at(-1).params.consumedBytes, t.sub.receiveState().receivedBytes, 'all three released after the frame');
});

// ---- the terminal's process channel and formatting ------------------------------

test('process channel: found by its exact title', () => {
  const list = [
    { channel: 'ahp-terminal:/1', type: 'terminal', title: 'bash' },
    { channel: 'ahp-telemetry:/x', type: 'telemetry', title: 'processes of ahp-terminal:/10' },
    { channel: 'ahp-telemetry:/p', type: 'telemetry', title: 'processes of ahp-terminal:/1' },
  ];
  assert.equal(findProcessChannel(list, 'ahp-terminal:/1').channel, 'ahp-telemetry:/p');
  assert.equal(findProcessChannel(list, 'ahp-terminal:/2'), null);
  assert.equal(findProcessChannel([{ channel: 'ahp-tcp:/1', type: 'tcp', title: 'processes of ahp-terminal:/2' }], 'ahp-terminal:/2'), null);
});

test('format: units from the metric name', () => {
  assert.equal(bytes(1536), '1.50 KiB');
  assert.equal(bytes(34 * 1048576), '34.0 MiB');
  assert.equal(percent(0.123), '12%');
  assert.equal(percent(0.05), '5.0%');
  assert.equal(number(12345678), '12.3M');
  assert.equal(number(42), '42');
  assert.equal(number(0.5), '0.5');
  assert.equal(formatterFor('process_resident_memory_bytes')(2048), '2.00 KiB');
  assert.equal(formatterFor('system_network_receive_bytes_per_second')(1024), '1.00 KiB/s');
  assert.equal(formatterFor('process_cpu_usage_ratio')(1), '100%');
});
