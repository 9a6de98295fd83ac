// format.js — number formatting for telemetry values, chosen by the metric
// name's unit suffix (Prometheus naming: _bytes, _ratio, _per_second).

const BINARY = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

/** bytes formats a byte count with binary units: 1536 → "1.5 KiB". */
export function bytes(v) {
  if (v == null || !Number.isFinite(v)) return '';
  let a = Math.abs(v);
  let i = 0;
  while (a >= 1024 && i < BINARY.length - 1) {
    a /= 1024;
    i++;
  }
  const s = i === 0 ? String(Math.round(a)) : a >= 100 ? a.toFixed(0) : a >= 10 ? a.toFixed(1) : a.toFixed(2);
  return `${v < 0 ? '-' : ''}${s} ${BINARY[i]}`;
}

/** number formats a plain value compactly: 12345678 → "12.3M", 0.000123 → "1.23e-4". */
export function number(v) {
  if (v == null || !Number.isFinite(v)) return '';
  const a = Math.abs(v);
  if (a === 0) return '0';
  if (a >= 1e15 || a < 1e-3) return v.toExponential(2);
  for (const [m, u] of [[1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e4, 'k']]) {
    if (a >= m) return `${trim((v / m).toPrecision(3))}${u}`;
  }
  return trim(a >= 100 ? v.toFixed(0) : v.toPrecision(3));
}

function trim(s) {
  return s.includes('.') && !s.includes('e') ? s.replace(/\.?0+$/, '') : s;
}

/** percent formats a ratio (1 = 100 %). */
export function percent(v) {
  if (v == null || !Number.isFinite(v)) return '';
  const p = v * 100;
  return `${Math.abs(p) >= 10 ? p.toFixed(0) : p.toFixed(1)}%`;
}

/** formatterFor returns the value formatter for a metric name. */
export function formatterFor(name) {
  if (/_bytes_per_second$/.test(name)) return (v) => (v == null ? '' : `${bytes(v)}/s`);
  if (/_bytes$/.test(name)) return bytes;
  if (/_ratio$/.test(name)) return percent;
  return number;
}
