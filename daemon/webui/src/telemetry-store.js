// telemetry-store.js — what a telemetry view keeps of a channel's samples
// (PROTOCOL.md §8): bounded, DOM-free, so node tests drive it.
//
//   RingBuffer     a fixed number of slots; pushing into a full one
//                  overwrites the oldest. Memory is allocated once.
//   Chart          one metric name: a table of rows (time, one value per
//                  series) in a ring of `capacity` rows, at most
//                  `maxSeries` series (a series is the name and its
//                  labels), each a Float64Array of the ring's size; it
//                  ranks the series by their recent values and fills
//                  uPlot's aligned data arrays for the ones shown.
//   TelemetryModel the charts of one subscription, seq tracking and the
//                  loss counters; applies telemetry/samples and
//                  telemetry/dropped.
//
// Values in a row, as uPlot gets them: a number; `undefined` where the
// series has no sample at that time (uPlot draws the line across it);
// `null` at a gap, where uPlot breaks the line. A gap is a row of its own
// between the last point before and the first after: a telemetry/dropped
// (shaded, with the loss), or a pause — the rows stop for more than
// PAUSE_INTERVALS times their usual interval and at least MIN_PAUSE_MS
// (not shaded: nothing was lost, the source was quiet). A series that
// pauses while others go on gets null at its first empty row after the
// pause in data(), so its line breaks too.

/** Rows kept per chart (and so points per series). */
export const DEFAULT_CAPACITY = 1200;
/** Series kept per chart; later ones of the same name are counted, not kept. */
export const DEFAULT_MAX_SERIES = 1024;
/** Series kept across a model's charts: bounds memory (8 bytes × capacity each). */
export const DEFAULT_MAX_SERIES_TOTAL = 2048;
/** Series a chart draws by default: the top N by recent value. */
export const DEFAULT_TOP_N = 8;
/** Charts (metric names) per view; later names are counted, not drawn. */
export const DEFAULT_MAX_CHARTS = 12;
/** Gap spans remembered per chart (for the shaded bands). */
export const MAX_GAPS = 32;
/** A pause is a gap when it is this many usual intervals long… */
export const PAUSE_INTERVALS = 3;
/** …and at least this long (ms): jitter and a collected garbage are not gaps. */
export const MIN_PAUSE_MS = 1000;

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

// Interval estimates: a moving average of the time between rows, where a
// step longer than 4 estimates counts as 4 (a pause must not teach the
// estimate that pauses are usual).
function nextInterval(est, dt) {
  if (!(dt > 0)) return est;
  if (est === 0) return dt;
  return est + 0.125 * (Math.min(dt, 4 * est) - est);
}

/** pauseThreshold is how long a step must be to break a line whose usual interval is dt. */
export function pauseThreshold(dt) {
  return Math.max(PAUSE_INTERVALS * dt, MIN_PAUSE_MS);
}

/**
 * Chart holds one metric name's rows. All its series share the row ring:
 * rows of one time carry every series sampled at that time (sources stamp a
 * collection with one time), so the table stays narrow.
 */
export class Chart {
  constructor(name, { capacity = DEFAULT_CAPACITY, maxSeries = DEFAULT_MAX_SERIES, budget = null } = {}) {
    if (!(Number.isSafeInteger(capacity) && capacity > 0)) throw new RangeError(`chart capacity ${capacity}`);
    this.name = name;
    this.capacity = capacity;
    this.maxSeries = maxSeries;
    this._budget = budget; // shared {left} across a model's charts, or null
    this._xs = new Float64Array(capacity);
    this._gap = new Uint8Array(capacity); // 1: a gap row (its values are null)
    this._head = 0; // slot of the oldest row
    this._len = 0;
    this.series = []; // [{key, labels, label, index, values, last, recent, dt, lastT}]
    this._byKey = new Map();
    this.hiddenSeries = new Set(); // keys beyond maxSeries (bounded below)
    this.hiddenSamples = 0;
    this.gapPending = false;
    this.gapCount = null;
    this.gaps = new RingBuffer(MAX_GAPS); // [{from, to, count}] time spans of dropped data
    this.pauses = 0; // gaps made by pauses
    this.dt = 0; // usual time between rows (ms)
    this.integral = true; // every value so far a whole number (a count): the y axis steps by 1 or more
    this.version = 0; // bumps on every change, for redraws
    this._data = [[]]; // uPlot's aligned arrays, reused
    this._isolated = []; // per drawn series: indexes of points with no line to either side
  }

  /** points is the number of rows held (≤ capacity). */
  get points() {
    return this._len;
  }

  _slot(i) {
    const j = this._head + i;
    return j >= this.capacity ? j - this.capacity : j;
  }

  /** x returns the i-th row's time, 0 the oldest. */
  x(i) {
    return i >= 0 && i < this._len ? this._xs[this._slot(i)] : undefined;
  }

  /** isGap reports whether the i-th row is a gap. */
  isGap(i) {
    return i >= 0 && i < this._len && this._gap[this._slot(i)] === 1;
  }

  _lastX() {
    return this._len ? this._xs[this._slot(this._len - 1)] : undefined;
  }

  _series(labels) {
    const key = seriesKey(labels);
    let s = this._byKey.get(key);
    if (s) return s;
    if (this.series.length >= this.maxSeries || (this._budget && this._budget.left <= 0)) {
      if (this.hiddenSeries.size < 1024) this.hiddenSeries.add(key);
      return null;
    }
    if (this._budget) this._budget.left--;
    // A new series has no values in the rows already held (NaN); the gap
    // rows are null for it through _gap.
    const v = new Float64Array(this.capacity).fill(NaN);
    s = {
      key,
      labels: labels ?? {},
      label: key || this.name,
      index: this.series.length, // order of first appearance: its colour
      v,
      values: null,
      last: undefined,
      recent: 0, // a moving average of its values: the rank
      dt: 0, // its usual interval (ms)
      lastT: undefined,
    };
    s.values = this._valuesView(s);
    this.series.push(s);
    this._byKey.set(key, s);
    return s;
  }

  // _valuesView is the RingBuffer-like reading of a series (length, get):
  // number, undefined (no sample) or null (a gap row).
  _valuesView(s) {
    const c = this;
    return {
      get length() {
        return c._len;
      },
      get(i) {
        if (i < 0 || i >= c._len) return undefined;
        const j = c._slot(i);
        if (c._gap[j]) return null;
        const x = s.v[j];
        return Number.isNaN(x) ? undefined : x;
      },
    };
  }

  _pushRow(t, gap) {
    let j;
    if (this._len < this.capacity) {
      j = this._slot(this._len);
      this._len++;
    } else {
      j = this._head;
      this._head = this._head + 1 === this.capacity ? 0 : this._head + 1;
    }
    this._xs[j] = t;
    this._gap[j] = gap ? 1 : 0;
    for (const s of this.series) s.v[j] = NaN;
    return j;
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
    const lastT = this._lastX();
    if (lastT !== undefined && t < lastT) t = lastT;
    if (lastT === undefined) this.gapPending = false;
    else {
      if (this.gapPending) {
        // One null row between the last point before the loss and the first
        // after it: uPlot breaks every line there (spanGaps is off).
        this._pushRow(lastT + (t - lastT) / 2, true);
        this.gaps.push({ from: lastT, to: t, count: this.gapCount });
        this.gapPending = false;
      } else if (this.dt > 0 && t - lastT > pauseThreshold(this.dt) && !this.isGap(this._len - 1)) {
        this._pushRow(lastT + (t - lastT) / 2, true);
        this.pauses++;
      }
      this.dt = nextInterval(this.dt, t - lastT);
    }
    if (s.lastT !== undefined && t > s.lastT) s.dt = nextInterval(s.dt, t - s.lastT);
    s.lastT = t;
    const n = this._len;
    // Same time as the newest row and this series' slot there still empty:
    // fill it (a collection stamps all its series with one time).
    const jn = n > 0 ? this._slot(n - 1) : -1;
    if (n > 0 && this._xs[jn] === t && !this._gap[jn] && Number.isNaN(s.v[jn])) {
      s.v[jn] = value;
    } else {
      const j = this._pushRow(t, false);
      s.v[j] = value;
    }
    if (this.integral && !Number.isInteger(value)) this.integral = false;
    s.recent = s.last === undefined ? value : s.recent + 0.2 * (value - s.recent);
    s.last = value;
    this.version++;
    return true;
  }

  /** visibleGaps returns the gap spans of dropped data that overlap the rows held. */
  visibleGaps() {
    const x0 = this.x(0);
    const out = [];
    for (let i = 0; i < this.gaps.length; i++) {
      const g = this.gaps.get(i);
      if (x0 !== undefined && g.to >= x0) out.push(g);
    }
    return out;
  }

  /**
   * ranked returns the series ordered by the size of their recent values,
   * largest first (ties: first seen first). The view shows the first N.
   */
  ranked() {
    return [...this.series].sort((a, b) => Math.abs(b.recent) - Math.abs(a.recent) || a.index - b.index);
  }

  /**
   * data fills and returns uPlot's aligned data [xs, ys...] for the series
   * given (default: all, in order of first appearance); arrays reused.
   * isolated(k) then returns the indexes of series k's points that have no
   * line to either side (a single sample, the first after a gap), which
   * the view draws as dots.
   */
  data(shown = this.series) {
    const d = this._data;
    d.length = shown.length + 1;
    const n = this._len;
    const xs = (d[0] ??= []);
    xs.length = n;
    for (let i = 0, j = this._head; i < n; i++) {
      xs[i] = this._xs[j];
      if (++j === this.capacity) j = 0;
    }
    this._isolated.length = shown.length;
    for (let k = 0; k < shown.length; k++) {
      const s = shown[k];
      const out = (d[k + 1] ??= []);
      out.length = n;
      const iso = (this._isolated[k] ??= []);
      iso.length = 0;
      const limit = s.dt > 0 ? pauseThreshold(s.dt) : Infinity;
      let prev = -1; // index of the last value or break
      let prevIsValue = false; // whether it is a value
      let prevAlone = false; // the last value had no line on its left
      for (let i = 0, j = this._head; i < n; i++) {
        let y;
        if (this._gap[j]) y = null;
        else {
          const x = s.v[j];
          y = Number.isNaN(x) ? undefined : x;
        }
        if (y !== undefined && y !== null && prevIsValue && xs[i] - xs[prev] > limit && prev + 1 < i) {
          // The series paused while others went on: break its line at its
          // first empty row after the pause's start.
          out[prev + 1] = null;
          if (prevAlone) iso.push(prev);
          prevIsValue = false;
        }
        out[i] = y;
        if (y === null) {
          if (prevIsValue && prevAlone) iso.push(prev);
          prev = i;
          prevIsValue = false;
        } else if (y !== undefined) {
          prevAlone = !prevIsValue;
          prev = i;
          prevIsValue = true;
        }
        if (++j === this.capacity) j = 0;
      }
      if (prevIsValue && prevAlone) iso.push(prev);
    }
    return d;
  }

  /** isolated returns the dot indexes of the k-th series of the last data() call. */
  isolated(k) {
    const a = this._isolated[k];
    return a && a.length ? a : null;
  }

  /**
   * valueAt returns series s's value at row i or, if it has none there,
   * its latest before it (not across a gap); null if none.
   */
  valueAt(s, i, maxBack = 64) {
    for (let k = Math.min(i, this._len - 1); k >= 0 && i - k <= maxBack; k--) {
      const j = this._slot(k);
      if (this._gap[j]) return null;
      const x = s.v[j];
      if (!Number.isNaN(x)) return x;
    }
    return null;
  }
}

/**
 * TelemetryModel applies one channel's telemetry messages. The counters are
 * what the view shows: samples drawn, batches, the samples lost in
 * telemetry/dropped ranges and the number of gaps. liveSamples counts the
 * samples that came after channel/ready (the history replay comes before
 * it), for the header's rate.
 */
export class TelemetryModel {
  constructor({
    capacity = DEFAULT_CAPACITY, maxSeries = DEFAULT_MAX_SERIES, maxSeriesTotal = DEFAULT_MAX_SERIES_TOTAL,
    maxCharts = DEFAULT_MAX_CHARTS, accept,
  } = {}) {
    this.budget = { left: maxSeriesTotal };
    this.opts = { capacity, maxSeries, budget: this.budget };
    this.maxCharts = maxCharts;
    this.accept = accept ?? null; // optional (name) → boolean filter
    this.charts = new Map(); // name → Chart, in order of first appearance
    this.hiddenCharts = new Set();
    this.lastSeq = 0;
    this.replaying = true; // before channel/ready: the history replay
    this.stats = {
      batches: 0,
      samples: 0,
      liveSamples: 0,
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

  /** resubscribed marks what follows, up to channel/ready, as a replay (a reconnect). */
  resubscribed() {
    this.replaying = true;
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
        this.replaying = false;
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
      if (!this.replaying) this.stats.liveSamples++;
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
