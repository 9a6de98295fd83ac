// telemetry-store.js — what a telemetry view keeps of a channel's samples
// (PROTOCOL.md §8): bounded, DOM-free, so node tests drive it.
//
//   RingBuffer     a fixed number of slots; pushing into a full one
//                  overwrites the oldest. Memory is allocated once.
//   Chart          one metric name: a table of rows (time, one value per
//                  series) in a ring of `capacity` rows, at most
//                  `maxSeries` series (a series is the name and its
//                  labels); it fills uPlot's aligned data arrays.
//   TelemetryModel the charts of one subscription, seq tracking and the
//                  loss counters; applies telemetry/samples and
//                  telemetry/dropped.
//
// Values in a row: a number; `undefined` where the series has no sample at
// that time (uPlot draws the line across it); `null` at a gap — the time
// span of a telemetry/dropped — where uPlot breaks every line.

/** Rows kept per chart (and so points per series). */
export const DEFAULT_CAPACITY = 1200;
/** Series drawn per chart; later ones of the same name are counted, not drawn. */
export const DEFAULT_MAX_SERIES = 8;
/** Charts (metric names) per view; later names are counted, not drawn. */
export const DEFAULT_MAX_CHARTS = 12;
/** Gap spans remembered per chart (for the shaded bands). */
export const MAX_GAPS = 32;

/** RingBuffer keeps the newest `capacity` values pushed. */
export class RingBuffer {
  constructor(capacity) {
    if (!(Number.isSafeInteger(capacity) && capacity > 0)) throw new RangeError(`ring capacity ${capacity}`);
    this.capacity = capacity;
    this._slots = new Array(capacity).fill(undefined);
    this._head = 0; // index of the oldest value
    this.length = 0;
  }

  /** push appends v; in a full ring the oldest value is overwritten and returned. */
  push(v) {
    if (this.length < this.capacity) {
      this._slots[(this._head + this.length) % this.capacity] = v;
      this.length++;
      return undefined;
    }
    const old = this._slots[this._head];
    this._slots[this._head] = v;
    this._head = (this._head + 1) % this.capacity;
    return old;
  }

  /** get returns the i-th value, 0 the oldest (undefined out of range). */
  get(i) {
    if (i < 0 || i >= this.length) return undefined;
    return this._slots[(this._head + i) % this.capacity];
  }

  /** set replaces the i-th value. */
  set(i, v) {
    if (i < 0 || i >= this.length) throw new RangeError(`ring index ${i} of ${this.length}`);
    this._slots[(this._head + i) % this.capacity] = v;
  }

  /** last returns the newest value. */
  last() {
    return this.length ? this.get(this.length - 1) : undefined;
  }

  /** copyTo fills out (an array, reused) with the values oldest first. */
  copyTo(out) {
    out.length = this.length;
    for (let i = 0, j = this._head; i < this.length; i++) {
      out[i] = this._slots[j];
      if (++j === this.capacity) j = 0;
    }
    return out;
  }

  clear() {
    this._slots.fill(undefined);
    this._head = 0;
    this.length = 0;
  }
}

/** seriesKey is the identity of a series within its name: its labels, sorted. */
export function seriesKey(labels) {
  if (!labels || typeof labels !== 'object') return '';
  const keys = Object.keys(labels).sort();
  return keys.map((k) => `${k}=${labels[k]}`).join(',');
}

/**
 * Chart holds one metric name's rows. All its series share the row ring:
 * rows of one time carry every series sampled at that time (sources stamp a
 * collection with one time), so the table stays narrow.
 */
export class Chart {
  constructor(name, { capacity = DEFAULT_CAPACITY, maxSeries = DEFAULT_MAX_SERIES } = {}) {
    this.name = name;
    this.capacity = capacity;
    this.maxSeries = maxSeries;
    this.xs = new RingBuffer(capacity);
    this.series = []; // [{key, labels, label, values: RingBuffer, last}]
    this._byKey = new Map();
    this.hiddenSeries = new Set(); // keys beyond maxSeries (bounded below)
    this.hiddenSamples = 0;
    this.gapPending = false;
    this.gapCount = null;
    this.gaps = new RingBuffer(MAX_GAPS); // [{from, to, count}] time spans of dropped data
    this.version = 0; // bumps on every change, for redraws
    this._data = [[]]; // uPlot's aligned arrays, reused
  }

  /** points is the number of rows held (≤ capacity). */
  get points() {
    return this.xs.length;
  }

  _series(labels) {
    const key = seriesKey(labels);
    let s = this._byKey.get(key);
    if (s) return s;
    if (this.series.length >= this.maxSeries) {
      if (this.hiddenSeries.size < 1024) this.hiddenSeries.add(key);
      return null;
    }
    s = { key, labels: labels ?? {}, label: key || this.name, values: new RingBuffer(this.capacity), last: undefined };
    // A new series has no values in the rows already held.
    for (let i = 0; i < this.xs.length; i++) s.values.push(this._rowIsGap(i) ? null : undefined);
    this.series.push(s);
    this._byKey.set(key, s);
    this._data.push([]);
    return s;
  }

  _rowIsGap(i) {
    const s = this.series[0];
    return !!s && s.values.get(i) === null;
  }

  _pushRow(t, fill) {
    this.xs.push(t);
    for (const s of this.series) s.values.push(fill);
  }

  /**
   * markGap records that data was lost before the next sample
   * (telemetry/dropped); count is the samples lost, if known.
   */
  markGap(count = null) {
    if (this.gapPending) this.gapCount = count == null || this.gapCount == null ? null : this.gapCount + count;
    else this.gapCount = count;
    this.gapPending = true;
  }

  /** add records one sample. Times going back are taken as the newest time held. */
  add(t, value, labels) {
    const s = this._series(labels);
    if (!s) {
      this.hiddenSamples++;
      return false;
    }
    const lastT = this.xs.last();
    if (lastT !== undefined && t < lastT) t = lastT;
    if (this.gapPending) {
      this.gapPending = false;
      if (lastT !== undefined) {
        // One null row between the last point before the loss and the first
        // after it: uPlot breaks every line there (spanGaps is off).
        this._pushRow(lastT + (t - lastT) / 2, null);
        this.gaps.push({ from: lastT, to: t, count: this.gapCount });
      }
    }
    const n = this.xs.length;
    // Same time as the newest row and this series' slot there still empty:
    // fill it (a collection stamps all its series with one time).
    if (n > 0 && this.xs.get(n - 1) === t && s.values.get(n - 1) === undefined) {
      s.values.set(n - 1, value);
    } else {
      this._pushRow(t, undefined);
      s.values.set(this.xs.length - 1, value);
    }
    s.last = value;
    this.version++;
    return true;
  }

  /** visibleGaps returns the gap spans that overlap the rows held. */
  visibleGaps() {
    const x0 = this.xs.get(0);
    const out = [];
    for (let i = 0; i < this.gaps.length; i++) {
      const g = this.gaps.get(i);
      if (x0 !== undefined && g.to >= x0) out.push(g);
    }
    return out;
  }

  /** data fills and returns uPlot's aligned data [xs, ys...] (arrays reused). */
  data() {
    const d = this._data;
    this.xs.copyTo(d[0]);
    for (let i = 0; i < this.series.length; i++) this.series[i].values.copyTo(d[i + 1]);
    return d;
  }
}

/**
 * TelemetryModel applies one channel's telemetry messages. The counters are
 * what the view shows: samples drawn, batches, the samples lost in
 * telemetry/dropped ranges and the number of gaps.
 */
export class TelemetryModel {
  constructor({ capacity = DEFAULT_CAPACITY, maxSeries = DEFAULT_MAX_SERIES, maxCharts = DEFAULT_MAX_CHARTS, accept } = {}) {
    this.opts = { capacity, maxSeries };
    this.maxCharts = maxCharts;
    this.accept = accept ?? null; // optional (name) → boolean filter
    this.charts = new Map(); // name → Chart, in order of first appearance
    this.hiddenCharts = new Set();
    this.lastSeq = 0;
    this.stats = {
      batches: 0,
      samples: 0,
      droppedMessages: 0,
      droppedBatches: 0,
      lostSamples: 0,
      gaps: 0,
      duplicateBatches: 0,
      invalidSamples: 0,
      ready: false,
    };
    this.version = 0;
  }

  /** chart returns the Chart of name (null if not kept). */
  chart(name) {
    return this.charts.get(name) ?? null;
  }

  _chart(name) {
    let c = this.charts.get(name);
    if (c) return c;
    if (this.charts.size >= this.maxCharts) {
      if (this.hiddenCharts.size < 1024) this.hiddenCharts.add(name);
      return null;
    }
    c = new Chart(name, this.opts);
    this.charts.set(name, c);
    return c;
  }

  _gap(count = null) {
    this.stats.gaps++;
    for (const c of this.charts.values()) c.markGap(count);
  }

  /**
   * apply takes one logical message {method, params} of the stream and
   * returns whether anything drawn changed. Unknown methods are ignored.
   */
  apply(msg) {
    const p = msg.params ?? {};
    switch (msg.method) {
      case 'telemetry/samples':
        return this._samples(p);
      case 'telemetry/dropped':
        return this._dropped(p);
      case 'channel/ready':
        this.stats.ready = true;
        return false;
      default:
        return false;
    }
  }

  _samples(p) {
    const seq = p.seq;
    if (Number.isSafeInteger(seq)) {
      // After a reconnect the replay repeats batches already drawn (seq is
      // the channel's): skip them. A jump forward is data lost while away.
      if (this.lastSeq && seq <= this.lastSeq) {
        this.stats.duplicateBatches++;
        return false;
      }
      if (this.lastSeq && seq > this.lastSeq + 1) {
        this.stats.droppedBatches += seq - this.lastSeq - 1;
        this._gap();
      }
      this.lastSeq = seq;
    }
    this.stats.batches++;
    let changed = false;
    for (const s of Array.isArray(p.samples) ? p.samples : []) {
      if (!s || typeof s.name !== 'string' || typeof s.value !== 'number' || !Number.isFinite(s.value) ||
          typeof s.t !== 'number' || !Number.isFinite(s.t)) {
        this.stats.invalidSamples++;
        continue;
      }
      if (this.accept && !this.accept(s.name)) continue;
      this.stats.samples++;
      const c = this._chart(s.name);
      if (c && c.add(s.t, s.value, s.labels)) changed = true;
    }
    if (changed) this.version++;
    return changed;
  }

  _dropped(p) {
    const from = p.fromSeq;
    const to = p.toSeq;
    this.stats.droppedMessages++;
    if (Number.isSafeInteger(from) && Number.isSafeInteger(to) && to >= from) {
      // toSeq is inclusive (§8).
      this.stats.droppedBatches += to - from + 1;
      if (to > this.lastSeq) this.lastSeq = to;
    }
    const count = Number.isSafeInteger(p.count) && p.count >= 0 ? p.count : null;
    if (count) this.stats.lostSamples += count;
    this._gap(count);
    this.version++;
    return true;
  }
}
