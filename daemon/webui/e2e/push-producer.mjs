// push-producer.mjs — the producer of e2e/telemetry.test.mjs (not a test
// file): sample lines in the text format of `ahpctl telemetry push`
// (`name value k=v`) on stdout at RATE samples/s, written in a batch every
// ~10 ms, for at most SECONDS seconds (and so at most RATE × SECONDS
// samples); then it exits. The test pipes stdout into
// `ahpctl telemetry push URI`.
//
//   node push-producer.mjs RATE SECONDS
//
// A tick is 5 samples: e2e_wave with phase=a..d (four phases of a triangle
// wave) and e2e_walk (a random walk in 0..1000); ticks are spaced so that
// ticks × 5 = RATE per second. Each batch holds the ticks due by the wall
// clock since the start, so a late timer is caught up and the rate holds
// (a backlog of more than a second is dropped rather than burst). The lines
// carry no time: ahpctl stamps each read with the time it read it. On exit
// it prints `push-producer: N samples in S s` on stderr.

const RATE = Number(process.argv[2] || 1000);
const SECONDS = Number(process.argv[3] || 60);
if (!(RATE >= 5 && SECONDS > 0)) {
  process.stderr.write('usage: node push-producer.mjs RATE SECONDS\n');
  process.exit(2);
}
const PER_TICK = 5;
const TICK_MS = (1000 * PER_TICK) / RATE;
const MAX_SAMPLES = Math.floor(RATE * SECONDS);

const start = performance.now();
let ticks = 0; // ticks written
let skipped = 0; // ticks given up after a backlog over a second
let samples = 0;
let walk = 500;
let seed = 7;

function tick(k) {
  const tMs = start + k * TICK_MS; // the tick's time, for the wave's shape
  const p = Math.floor(tMs / 8) % 200;
  seed = (seed * 1103515245 + 12345) % 2147483648;
  walk = Math.min(1000, Math.max(0, walk + (seed % 41) - 20));
  let out = '';
  for (const [ph, off] of [['a', 0], ['b', 50], ['c', 100], ['d', 150]]) {
    let q = (p + off) % 200;
    if (q > 100) q = 200 - q;
    out += `e2e_wave ${q} phase=${ph}\n`;
  }
  return out + `e2e_walk ${walk}\n`;
}

function finish(code = 0) {
  clearInterval(timer);
  process.stderr.write(`push-producer: ${samples} samples in ${((performance.now() - start) / 1000).toFixed(1)} s` +
    (skipped ? ` (${skipped} ticks skipped after a backlog)` : '') + '\n');
  process.exit(code);
}

const timer = setInterval(() => {
  const now = performance.now();
  if (now - start >= SECONDS * 1000 || samples >= MAX_SAMPLES) finish();
  let due = Math.floor((now - start) / TICK_MS) + 1 - ticks - skipped;
  const maxBacklog = Math.ceil(1000 / TICK_MS);
  if (due > maxBacklog) {
    skipped += due - maxBacklog;
    due = maxBacklog;
  }
  let batch = '';
  for (let i = 0; i < due && samples < MAX_SAMPLES; i++) {
    batch += tick(ticks + skipped);
    ticks++;
    samples += PER_TICK;
  }
  // Pipes are written synchronously on Linux: a reader that falls behind
  // blocks this loop, and the next batch catches up.
  if (batch) process.stdout.write(batch);
}, 10);

process.stdout.on('error', (e) => {
  process.stderr.write(`push-producer: stdout: ${e.message}\n`);
  finish(e.code === 'EPIPE' ? 0 : 1);
});
process.on('SIGTERM', () => finish());
