// The telemetry charts' logic, without a browser (issue 41): axis and
// legend formatting (format.js), gaps for drops and pauses, dots for lone
// samples, legend values, the top-N series and the live-only rate
// (telemetry-store.js). The layout on a canvas is checked in Chromium by
// e2e/telemetry-charts.test.mjs.
process.env.TZ = 'UTC'; // time labels are local time: make them the test's

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { axisIncrements, axisLabels, TIME_INCRS, timeLabels, timeLabelTemplate, timeStep, unitFor, valueFormatter } from '../src/format.js';
import { Chart, DEFAULT_TOP_N, MIN_PAUSE_MS, TelemetryModel } from '../src/telemetry-store.js';

const MiB = 1024 * 1024;
const samples = (seq, list) => ({ method: 'telemetry/samples', params: { seq, samples: list } });

// ---- formatting ---------------------------------------------------------------

test('format: one unit per axis, the decimals its ticks need', () => {
  const bps = unitFor('system_network_receive_bytes_per_second');
  // The chart: 2.72, 1.81, 0.91 MiB/s read "72 MiB/s…" when clipped.
  assert.deepEqual(axisLabels(bps, [0.91 * MiB, 1.81 * MiB, 2.72 * MiB]), ['0.91 MiB/s', '1.81 MiB/s', '2.72 MiB/s']);
  assert.deepEqual(axisLabels(bps, [4.3 * MiB]), ['4.3 MiB/s']);
  // The unit is the largest tick's, for every tick: no 512 KiB/s beside 1.0 MiB/s.
  assert.deepEqual(axisLabels(bps, [0, 0.5 * MiB, MiB, 1.5 * MiB]), ['0 MiB/s', '0.5 MiB/s', '1.0 MiB/s', '1.5 MiB/s']);
  assert.deepEqual(axisLabels(unitFor('process_resident_memory_bytes'), [0, 256 * MiB, 512 * MiB, 768 * MiB, 1024 * MiB]),
    ['0 GiB', '0.25 GiB', '0.50 GiB', '0.75 GiB', '1.00 GiB']);
  assert.deepEqual(axisLabels(unitFor('x_bytes'), [0, 200, 400, 600]), ['0 B', '200 B', '400 B', '600 B']);
  assert.deepEqual(axisLabels(unitFor('system_cpu_usage_ratio'), [0, 0.025, 0.05, 0.075]), ['0%', '2.5%', '5.0%', '7.5%']);
  assert.deepEqual(axisLabels(unitFor('system_load1'), [0, 20000, 40000, 60000]), ['0', '20k', '40k', '60k']);
  assert.deepEqual(axisLabels(unitFor('system_load1'), [0.1, 0.2, 0.3]), ['0.1', '0.2', '0.3']);
  assert.deepEqual(axisLabels(unitFor('e2e_walk'), [400, 600, 800, 1000]), ['400', '600', '800', '1000'], 'counts below 10,000 whole');
  assert.deepEqual(axisLabels(unitFor('go_gc_duration_seconds'), [0, 0.0005, 0.001, 0.0015]), ['0 ms', '0.5 ms', '1.0 ms', '1.5 ms']);
  assert.deepEqual(axisLabels(unitFor('x'), [1e6, 1.0001e6]), ['1.0000M', '1.0001M'], 'close ticks get the digits that tell them apart');
  // The steps are round in the prefix the axis is written in: 22.2 GiB, not
  // 22.1679688 GiB (a step of 100 MiB under GiB labels).
  const mem = unitFor('system_memory_available_bytes');
  const GiB = 1024 * MiB;
  const lo = 22.15 * GiB;
  const hi = 22.58 * GiB;
  const step = axisIncrements(mem, lo, hi).find((i) => (hi - lo) / i <= 6);
  assert.equal(step, 0.1 * GiB);
  const ticks = [22.2, 22.3, 22.4, 22.5].map((g) => g * GiB);
  assert.deepEqual(axisLabels(mem, ticks, { min: lo, max: hi }), ['22.2 GiB', '22.3 GiB', '22.4 GiB', '22.5 GiB']);
  // A scale just past a prefix writes its ticks in that prefix.
  assert.deepEqual(axisLabels(mem, [0, 0.5 * GiB, GiB], { min: 0, max: 1.05 * GiB }), ['0 GiB', '0.5 GiB', '1.0 GiB']);
});

test('format: random axes: neighbouring labels differ, one unit, and each reads back as its tick', () => {
  let seed = 41;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const names = ['a_bytes_per_second', 'a_bytes', 'a_ratio', 'a', 'a_seconds', 'a_per_second'];
  for (let n = 0; n < 3000; n++) {
    const unit = unitFor(names[n % names.length]);
    const mag = 10 ** (rnd() * 14 - 4);
    const min = rnd() < 0.3 ? 0 : mag * rnd();
    const max = min + mag * (0.01 + rnd());
    // As uPlot does: the smallest increment giving at most ~8 ticks.
    const incr = axisIncrements(unit, min, max).find((i) => (max - min) / i <= 8);
    if (!incr) continue;
    const splits = [];
    for (let v = Math.ceil(min / incr) * incr; v <= max && splits.length < 20; v += incr) splits.push(+v.toPrecision(15));
    if (splits.length < 2) continue;
    const labels = axisLabels(unit, splits, { min, max });
    const what = `${names[n % names.length]} ${splits.join(',')} → ${labels.join(' | ')}`;
    for (let i = 1; i < labels.length; i++) assert.notEqual(labels[i], labels[i - 1], what);
    const suffixes = new Set(labels.filter((l, i) => splits[i] !== 0).map((l) => l.replace(/^-?[\d.e+-]+/, '')));
    assert.ok(suffixes.size <= 1, `one unit per axis: ${what}`);
    // Short: the steps are round in the axis' own prefix (% has none).
    if (unit.base !== 1) for (const l of labels) assert.ok(l.replace(/[^\d]/g, '').replace(/^0+/, '').length <= 6, `short labels: ${what}`);
  }
});

test('format: units from the name, a scrape\'s counter rates (NAME_per_second) included', () => {
  const mib = valueFormatter(unitFor('node_network_receive_bytes_total_per_second'))(3 * MiB);
  assert.equal(mib, '3.00 MiB/s');
  assert.equal(valueFormatter(unitFor('node_cpu_seconds_total_per_second'))(0.25), '25.0%');
  assert.equal(valueFormatter(unitFor('http_requests_total_per_second'))(12), '12.0/s');
  assert.equal(valueFormatter(unitFor('process_resident_memory_bytes'))(2048), '2.00 KiB');
  assert.equal(valueFormatter(unitFor('scrape_duration_seconds'))(0.0125), '12.5 ms');
});

test('format: legend values take three significant digits and a prefix of their own', () => {
  const bps = valueFormatter(unitFor('system_network_transmit_bytes_per_second'));
  assert.equal(bps(2.72 * MiB), '2.72 MiB/s');
  assert.equal(bps(512), '512 B/s');
  assert.equal(bps(1536), '1.50 KiB/s');
  assert.equal(bps(0), '0 B/s');
  assert.equal(valueFormatter(unitFor('x_ratio'))(0.1234), '12.3%');
  assert.equal(valueFormatter(unitFor('x_ratio'))(1), '100%');
  assert.equal(valueFormatter(unitFor('load1'))(1.5), '1.5');
  assert.equal(valueFormatter(unitFor('load1'))(1234567), '1.23M');
  assert.equal(valueFormatter(unitFor('x_seconds'))(0.0032), '3.20 ms');
  assert.equal(valueFormatter(unitFor('x'))(-2500), '-2500', 'counts below 10,000 whole');
  assert.equal(valueFormatter(unitFor('x'))(-25000), '-25k', 'plain numbers lose trailing zeros');
});

test('format: time labels by the tick step, never wider than their template', () => {
  const t = Date.UTC(2026, 11, 7, 12, 42, 5, 500);
  assert.deepEqual(timeLabels([t], 1000), ['12:42:05']);
  assert.deepEqual(timeLabels([t], 60_000), ['12:42']);
  assert.deepEqual(timeLabels([Date.UTC(2026, 11, 8)], 3_600_000), ['12-08'], 'midnight shows the day');
  assert.deepEqual(timeLabels([t], 86_400_000), ['12-07']);
  assert.deepEqual(timeLabels([Date.UTC(2026, 11, 7, 18, 40, 40) - 0.0002], 10_000), ['18:40:40'], 'a hair before the second is that second');
  assert.deepEqual(timeLabels([t], 500), ['42:05.5']);
  assert.deepEqual(timeLabels([t + 25], 25), ['42:05.52']);
  for (const incr of TIME_INCRS) {
    for (const l of timeLabels([t, t + incr, Date.UTC(2026, 0, 1)], incr)) {
      assert.ok(l.length <= timeLabelTemplate(incr).length, `${l} (step ${incr}) wider than ${timeLabelTemplate(incr)}`);
    }
  }
});

test('time axis: the step leaves each label its width and a margin, at any width', () => {
  const width = (s) => 6.6 * s.length; // 11px monospace
  for (const range of [5_000, 60_000, 600_000, 1_200_000, 3_600_000, 86_400_000, 30 * 86_400_000]) {
    for (let dim = 100; dim <= 2000; dim += 50) {
      const { incr, space } = timeStep(range, dim, width, 16);
      assert.ok(TIME_INCRS.includes(incr));
      const px = (incr / range) * dim;
      assert.ok(px >= space && px >= width(timeLabelTemplate(incr)) + 16 - 1e-6 || incr === TIME_INCRS.at(-1), `${range} ms over ${dim} px: step ${incr} is ${px} px`);
      // The step before it would not fit: it is the densest that does.
      const k = TIME_INCRS.indexOf(incr);
      if (k > 0) assert.ok((TIME_INCRS[k - 1] / range) * dim < width(timeLabelTemplate(TIME_INCRS[k - 1])) + 16);
    }
  }
  // Ten minutes over 400 px: labels two minutes apart, not five.
  assert.equal(timeStep(600_000, 400, width).incr, 120_000);
});

// ---- gaps and dots ----------------------------------------------------------------

test('a single sample is a dot: isolated points are listed for the chart to draw', () => {
  const c = new Chart('one', { capacity: 20 });
  c.add(1000, 5);
  let d = c.data();
  assert.deepEqual(d, [[1000], [5]]);
  assert.deepEqual(c.isolated(0), [0], 'one sample: a dot');
  c.add(2000, 6);
  c.data();
  assert.equal(c.isolated(0), null, 'two joined samples: a line, no dot');
  // A value between gaps, and another series' lone value among undefined rows.
  c.markGap(3);
  c.add(3000, 7);
  c.markGap(3);
  c.add(4000, 8, { k: 'b' });
  d = c.data();
  assert.deepEqual(d[0], [1000, 2000, 2500, 3000, 3500, 4000]);
  assert.deepEqual(d[1], [5, 6, null, 7, null, undefined]);
  assert.deepEqual(d[2], [undefined, undefined, null, undefined, null, 8]);
  assert.deepEqual(c.isolated(0), [3], 'the value between the gaps');
  assert.deepEqual(c.isolated(1), [5], 'the new series\' first value');
});

test('a pause of the source breaks the lines (a gap row, no band); jitter does not', () => {
  const c = new Chart('p', { capacity: 100 });
  let t = 0;
  for (let i = 0; i < 10; i++) c.add((t += 1000), i);
  assert.equal(c.pauses, 0);
  c.add((t += 1400), 10); // jitter: under 3 intervals
  assert.equal(c.pauses, 0);
  c.add((t += 5000), 11); // a pause of 5 intervals
  assert.equal(c.pauses, 1);
  const d = c.data();
  const nulls = d[1].map((v, i) => (v === null ? i : -1)).filter((i) => i >= 0);
  assert.equal(nulls.length, 1);
  assert.ok(d[0][nulls[0]] > t - 5000 && d[0][nulls[0]] < t);
  assert.deepEqual(c.visibleGaps(), [], 'a pause is not a loss');
  // Fast sources pause for at least MIN_PAUSE_MS before a gap.
  const f = new Chart('f', { capacity: 100 });
  let u = 0;
  for (let i = 0; i < 20; i++) f.add((u += 5), i);
  f.add((u += MIN_PAUSE_MS - 10), 0);
  assert.equal(f.pauses, 0);
  f.add((u += MIN_PAUSE_MS + 500), 0);
  assert.equal(f.pauses, 1);
});

test('a series that pauses while others go on: its line breaks at its first empty row', () => {
  const c = new Chart('s', { capacity: 100 });
  for (let i = 0; i < 10; i++) {
    c.add(i * 1000, i, { k: 'a' });
    if (i < 3 || i > 7) c.add(i * 1000, -i, { k: 'b' });
  }
  const d = c.data();
  assert.deepEqual(d[2], [-0, -1, -2, null, undefined, undefined, undefined, undefined, -8, -9]);
  assert.deepEqual(d[1], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  assert.equal(c.pauses, 0);
});

// ---- legend values and the top N ----------------------------------------------------

test('a chart of whole numbers knows it (its y axis steps by 1 or more)', () => {
  const c = new Chart('ahpd_connections', { capacity: 10 });
  c.add(1, 0);
  c.add(2, 1);
  assert.equal(c.integral, true);
  c.add(3, 0.5);
  assert.equal(c.integral, false);
});

test('legend: the last value of each series, and the value at a hovered row', () => {
  const c = new Chart('l', { capacity: 50 });
  c.add(1000, 1, { k: 'a' });
  c.add(1000, 10, { k: 'b' });
  c.add(2000, 2, { k: 'a' });
  c.add(3000, 3, { k: 'a' });
  c.add(3000, 30, { k: 'b' });
  const [a, b] = c.series;
  assert.equal(a.last, 3);
  assert.equal(b.last, 30);
  assert.equal(c.valueAt(a, 1), 2);
  assert.equal(c.valueAt(b, 1), 10, 'no sample at the row: the one before it');
  assert.equal(c.valueAt(b, 2), 30);
  c.markGap(1);
  c.add(9000, 9, { k: 'a' });
  assert.equal(c.valueAt(b, 4), null, 'not across a gap');
  assert.equal(c.valueAt(b, 3), null, 'the gap row itself');
});

test('top N: ranked by recent value, stable colours, the rest counted; 1,000 series kept in bounds', () => {
  const m = new TelemetryModel({ capacity: 60 });
  let seq = 0;
  for (let tick = 0; tick < 60; tick++) {
    const list = [];
    for (let i = 0; i < 1000; i++) list.push({ t: tick * 1000, name: 'many', value: i === 500 && tick > 40 ? 5000 : i, labels: { i: String(i) } });
    m.apply(samples(++seq, list));
  }
  const c = m.chart('many');
  assert.equal(c.series.length, 1000);
  assert.equal(c.points, 60, 'one row per tick for all 1,000 series');
  const top = c.ranked().slice(0, DEFAULT_TOP_N);
  assert.deepEqual(top.map((s) => s.labels.i), ['500', '999', '998', '997', '996', '995', '994', '993']);
  assert.equal(top[0].index, 500, 'a series keeps its index (its colour) whatever its rank');
  const d = c.data(top);
  assert.equal(d.length, DEFAULT_TOP_N + 1);
  assert.equal(d[1][59], 5000);
  assert.equal(d[2][59], 999);
  // The model's budget of kept series bounds memory across charts.
  const small = new TelemetryModel({ capacity: 10, maxSeriesTotal: 5 });
  small.apply(samples(1, [0, 1, 2, 3].map((i) => ({ t: 1, name: 'x', value: i, labels: { i: String(i) } }))));
  small.apply(samples(2, [0, 1, 2, 3].map((i) => ({ t: 1, name: 'y', value: i, labels: { i: String(i) } }))));
  assert.equal(small.chart('x').series.length, 4);
  assert.equal(small.chart('y').series.length, 1);
  assert.equal(small.chart('y').hiddenSeries.size, 3);
});

test('rate: samples of the history replay are not live; after channel/ready they are, and after a reconnect\'s replay again', () => {
  const m = new TelemetryModel();
  m.apply(samples(1, [{ t: 1, name: 'a', value: 1 }, { t: 1, name: 'b', value: 1 }]));
  m.apply(samples(2, [{ t: 2, name: 'a', value: 1 }]));
  assert.equal(m.stats.samples, 3);
  assert.equal(m.stats.liveSamples, 0);
  m.apply({ method: 'channel/ready', params: {} });
  m.apply(samples(3, [{ t: 3, name: 'a', value: 1 }]));
  assert.equal(m.stats.liveSamples, 1);
  m.resubscribed();
  m.apply(samples(3, [{ t: 3, name: 'a', value: 1 }])); // replayed: a duplicate
  m.apply(samples(4, [{ t: 4, name: 'a', value: 1 }])); // missed while away: history
  assert.equal(m.stats.liveSamples, 1);
  m.apply({ method: 'channel/ready', params: {} });
  m.apply(samples(5, [{ t: 5, name: 'a', value: 1 }]));
  assert.equal(m.stats.liveSamples, 2);
  assert.equal(m.stats.samples, 6);
});
