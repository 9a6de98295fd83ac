// format.js — number formatting for telemetry values, chosen by the metric
// name's unit suffix (Prometheus naming: _bytes, _ratio, _seconds,
// _per_second), and the labels of a chart's axes.
//
// A chart's y axis picks its unit once, from its largest tick (1.5 MiB/s
// for ticks up to 1.5 MiB/s, never 900 KiB/s beside 1.0 MiB/s), and as
// many decimals as the ticks need to be told apart (0.5, 1.0, 1.5 MiB/s);
// byte axes step in binary multiples so those ticks are round. Values in
// the legend take three significant digits and their own unit.

function trim(s) {
  return s.includes('.') && !s.includes('e') ? s.replace(/\.?0+$/, '') : s;
}

/** percent formats a ratio (1 = 100 %). */
export function percent(v) {
  if (v == null || !Number.isFinite(v)) return '';
  const p = v * 100;
  return `${Math.abs(p) >= 10 ? p.toFixed(0) : p.toFixed(1)}%`;
}

// ---- units --------------------------------------------------------------------

/**
 * A unit says how a metric's values are written:
 *   base   1024 (IEC prefixes: KiB, MiB…), 1000 (SI: k, M…) or 1 (none)
 *   symbol what follows the prefix ("B", "B/s", "s", "/s", "%", "")
 *   scale  what a value is multiplied by first (100 for a ratio in %)
 *   small  whether SI prefixes below 1 are used (m, µ, n: for seconds)
 */
const UNITS = {
  bytesPerSecond: { base: 1024, symbol: 'B/s', scale: 1, small: false },
  bytes: { base: 1024, symbol: 'B', scale: 1, small: false },
  ratio: { base: 1, symbol: '%', scale: 100, small: false },
  percent: { base: 1, symbol: '%', scale: 1, small: false },
  seconds: { base: 1000, symbol: 's', scale: 1, small: true },
  perSecond: { base: 1000, symbol: '/s', scale: 1, small: false },
  plain: { base: 1000, symbol: '', scale: 1, small: false },
};

/** unitFor returns the unit of a metric name, from its suffix. */
export function unitFor(name) {
  const n = String(name ?? '');
  // A scrape source writes a counter's rate as NAME_per_second.
  if (/_bytes(_total)?_per_second$|_bytes_per_sec$/.test(n)) return UNITS.bytesPerSecond;
  if (/_seconds(_total)?_per_second$/.test(n)) return UNITS.ratio; // busy seconds a second: a share
  if (/_bytes(_total)?$/.test(n)) return UNITS.bytes;
  if (/_ratio$/.test(n)) return UNITS.ratio;
  if (/_percent$/.test(n)) return UNITS.percent;
  if (/_seconds$/.test(n)) return UNITS.seconds;
  if (/_per_second$/.test(n)) return UNITS.perSecond;
  return UNITS.plain;
}

const SI_UP = ['', 'k', 'M', 'G', 'T', 'P', 'E'];
const IEC_UP = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'];
const SI_DOWN = ['', 'm', 'µ', 'n'];

// prefixFor returns [divisor, prefix] for a magnitude a (already scaled).
function prefixFor(unit, a) {
  if (unit.base === 1 || !(a > 0) || !Number.isFinite(a)) return [1, ''];
  const up = unit.base === 1024 ? IEC_UP : SI_UP;
  let i = 0;
  let div = 1;
  // A count up to 9,999 is written whole (400, 1000), not 0.4k, 1.0k.
  if (unit.base === 1000 && !unit.small && a < 10_000) return [1, ''];
  while (a >= div * unit.base && i < up.length - 1) {
    div *= unit.base;
    i++;
  }
  if (i > 0 || !unit.small || a >= 1) return [div, up[i]];
  let k = 0;
  div = 1;
  while (a < div && k < SI_DOWN.length - 1) {
    div /= 1000;
    k++;
  }
  return [div, SI_DOWN[k]];
}

function join(num, prefix, unit) {
  if (unit.symbol === '%') return `${num}%`;
  const sym = unit.base === 1024 && prefix === '' ? unit.symbol : `${prefix}${unit.symbol}`;
  if (!sym) return num;
  // SI prefixes stick to a plain number (12.3k, 4.5k/s); units get a space.
  if (!unit.symbol || unit.symbol[0] === '/') return `${num}${sym}`;
  return `${num} ${sym}`;
}

/**
 * valueFormatter returns (v) → text with three significant digits and a
 * prefix of its own: 2.72 MiB/s, 512 B, 12.5%, 3.20 ms, 1.23M.
 */
export function valueFormatter(unit) {
  return (v) => {
    if (v == null || !Number.isFinite(v)) return '';
    const x = v * unit.scale;
    const a = Math.abs(x);
    const [div, prefix] = prefixFor(unit, a);
    const y = x / div;
    const ay = Math.abs(y);
    let num;
    if (ay === 0) num = '0';
    else if (ay >= 1e15 || ay < 1e-3) num = y.toExponential(2);
    else if (unit.base === 1024 && prefix === '' && Number.isInteger(y)) num = String(y);
    else if (ay >= 100) num = y.toFixed(0);
    else num = y.toPrecision(3);
    if (unit.symbol === '' && num.includes('.') && !num.includes('e')) num = trim(num);
    return join(num, prefix, unit);
  };
}

/** bytes formats a byte count with binary units: 1536 → "1.50 KiB". */
export const bytes = valueFormatter(UNITS.bytes);

/** number formats a plain value compactly: 12345678 → "12.3M", 0.000123 → "1.23e-4". */
export const number = valueFormatter(UNITS.plain);

/**
 * axisLabels formats one axis' ticks: one prefix for the axis (from the
 * largest of its ticks and of range {min, max}, the axis' scale, as
 * axisIncrements takes it) and the fewest decimals that write every tick
 * exactly, so neighbouring ticks always differ (0.5, 1.0, 1.5 MiB/s; 2.72
 * is written 2.72, not 72 clipped nor 2.7).
 */
export function axisLabels(unit, splits, range = null) {
  let max = 0;
  for (const v of splits) if (v != null && Number.isFinite(v)) max = Math.max(max, Math.abs(v * unit.scale));
  for (const v of [range?.min, range?.max]) if (v != null && Number.isFinite(v)) max = Math.max(max, Math.abs(v * unit.scale));
  const [div, prefix] = prefixFor(unit, max);
  const ys = splits.map((v) => (v == null || !Number.isFinite(v) ? null : (v * unit.scale) / div));
  // The smallest step between ticks bounds how exact a label must be.
  let step = Infinity;
  for (let i = 1; i < ys.length; i++) {
    if (ys[i] != null && ys[i - 1] != null && ys[i] !== ys[i - 1]) step = Math.min(step, Math.abs(ys[i] - ys[i - 1]));
  }
  const tol = Number.isFinite(step) ? step * 1e-6 : Math.max(max / div, 1) * 1e-9;
  let decimals = 0;
  for (; decimals < 12; decimals++) {
    const f = 10 ** decimals;
    if (ys.every((y) => y == null || Math.abs(Math.round(y * f) / f - y) <= tol)) break;
  }
  // Exact, yet two ticks could still print alike if the step is below the
  // exactness bound; add digits until neighbours differ.
  let texts;
  for (;; decimals++) {
    texts = ys.map((y) => (y == null ? null : y === 0 ? '0' : y.toFixed(decimals)));
    let same = false;
    for (let i = 1; i < texts.length; i++) if (texts[i] != null && texts[i] === texts[i - 1]) same = true;
    if (!same || decimals >= 15) break;
  }
  return texts.map((t) => (t == null ? null : t === '0' ? join('0', unit.symbol && unit.symbol !== '%' ? prefix : '', unit) : join(t, prefix, unit)));
}

/**
 * axisIncrements returns the tick steps for a unit's y axis over the
 * scale min…max: 1, 2, 2.5 and 5 times powers of ten of the prefix the
 * axis will be written in (axisLabels), so every tick is a short exact
 * number: 0.5, 1.0, 1.5 MiB rather than 476.8 KiB, 953.7 KiB, and 22.2,
 * 22.3 GiB rather than 22.1679688, 22.2656250 GiB (steps of 100 MiB).
 */
export function axisIncrements(unit, min = 0, max = 0) {
  const a = Math.max(Math.abs(min * unit.scale), Math.abs(max * unit.scale));
  const [div] = prefixFor(unit, Number.isFinite(a) ? a : 0);
  const out = [];
  for (let e = -12; e <= 18; e++) for (const k of [1, 2, 2.5, 5]) out.push((+(k * 10 ** e).toPrecision(12) * div) / unit.scale);
  return out;
}

// ---- time -------------------------------------------------------------------

const pad = (n, w = 2) => String(n).padStart(w, '0');

/**
 * timeLabels formats an x axis' ticks (Unix ms, local time) for a tick
 * step incr (ms): HH:MM:SS below a minute, HH:MM below a day (MM-DD at
 * midnight), MM-DD above, MM:SS.f below a second; timeLabelTemplate(incr)
 * is as wide as the widest of them.
 */
export function timeLabels(splits, incr) {
  return splits.map((t) => {
    if (t == null || !Number.isFinite(t)) return null;
    // uPlot's splits over fractional-ms times can land a hair before the
    // second (…:39.9999): label the nearest millisecond.
    const d = new Date(Math.round(t));
    const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
    const md = `${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
    if (incr >= 86_400_000) return md;
    if (incr >= 60_000) return d.getHours() === 0 && d.getMinutes() === 0 ? md : hm;
    if (incr >= 1000) return `${hm}:${pad(d.getSeconds())}`;
    // Below a second: minutes, seconds and as many digits as the step needs.
    const digits = incr >= 100 ? 1 : incr >= 10 ? 2 : 3;
    return `${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3).slice(0, digits)}`;
  });
}

const SEC = 1000;
const MIN = 60 * SEC;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

/** TIME_INCRS are the steps a time axis may take (ms). */
export const TIME_INCRS = [
  1, 2, 5, 10, 20, 50, 100, 200, 500,
  SEC, 2 * SEC, 5 * SEC, 10 * SEC, 15 * SEC, 30 * SEC,
  MIN, 2 * MIN, 5 * MIN, 10 * MIN, 15 * MIN, 30 * MIN,
  HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR,
  DAY, 2 * DAY, 7 * DAY, 14 * DAY, 28 * DAY, 56 * DAY, 112 * DAY, 364 * DAY,
];

/** timeLabelTemplate is as wide as the widest label of a time axis of step incr (monospace digits). */
export function timeLabelTemplate(incr) {
  if (incr < 10) return '00:00.000';
  if (incr < 100) return '00:00.00';
  if (incr < SEC) return '00:00.0';
  if (incr < MIN) return '00:00:00';
  return '00:00';
}

/**
 * timeStep picks a time axis' step for a range (ms) over dim pixels: the
 * smallest of TIME_INCRS whose ticks are at least their label's width
 * (width(text) in px) plus margin apart, so labels never overlap at any
 * width. space is the pixel distance of that step, which uPlot takes as
 * its minimum tick spacing (it then picks this same step).
 */
export function timeStep(range, dim, width, margin = 16) {
  if (!(range > 0) || !(dim > 0)) return { incr: TIME_INCRS[TIME_INCRS.length - 1], space: dim > 0 ? dim : 1 };
  for (const incr of TIME_INCRS) {
    const px = (incr / range) * dim;
    if (px >= width(timeLabelTemplate(incr)) + margin) return { incr, space: px * (1 - 1e-9) };
  }
  const incr = TIME_INCRS[TIME_INCRS.length - 1];
  return { incr, space: (incr / range) * dim * (1 - 1e-9) };
}

/** formatterFor returns the legend's value formatter for a metric name. */
export function formatterFor(name) {
  return valueFormatter(unitFor(name));
}
