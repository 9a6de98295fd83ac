// bench-cat.mjs — the web page under a terminal flood, in real Chromium
// (issue 17): `cat` of a 64 MiB text file typed into the page's terminal,
// timed until its last line is on the screen, against the raw PTY read of
// the same file in the same run. Not a test (make test does not run it):
//
//   make bench-browser                       # = node e2e/bench-cat.mjs
//   make bench-browser BENCHFLAGS='--windows 256KiB,4MiB --rounds 5'
//   make bench-browser BENCHFLAGS='--links none,0,20ms,80ms,200ms --windows default'
//
// Each round runs, for every link in --links and every window in
// --windows (the order rotates from round to round), one raw read and one
// page run:
//
//   raw    `ahpbench -rawread FILE` (bench/termbench/rawread.go, the
//          raw reader of make bench-process and make bench-attach too):
//          `cat FILE` on a fresh 24x80 PTY whose other end is read (64 KiB
//          reads) and discarded as fast as one process can — the ceiling.
//   page   a new tab opens the page with `?window=W` (none for the window
//          "default": the page's own, which starts at 256 KiB and grows
//          to fit the path, tune.js; and --frame, --message,
//          --renderer), attaches to the daemon's terminal
//          (a /bin/sh), clears the screen, types `cat FILE`; the clock
//          starts in the page when xterm hands the Enter key to the page
//          (term.onData) and stops at the first xterm render (term.onRender)
//          after a write whose parse left the marker line (the file's last
//          line, unique to the run) in the viewport: "the last line is on
//          the screen". Measured in the page with performance.now(). A
//          snapshot's preview counts (it shows the screen the snapshot
//          ends on, on the alternate screen, and holds that frame until
//          the snapshot is applied); "snapshot applied" is the first
//          render after a parse that left the marker in the normal
//          screen's viewport.
//
// Columns: raw s, page s, page / raw, snapshot applied s, snapshots
// (terminal/reset messages the page got during the cat, and how many came
// with a preview; the daemon sends one when the page falls
// more than its window plus the terminal's backlog, 1 MiB, behind), output
// MB the page parsed (UTF-16 code units / 1e6: a page that got snapshots
// skipped part of the stream), credits sent, page CPU s (the renderer
// process, all threads: CDP SystemInfo.getProcessInfo), of it main-thread
// busy s (CDP Performance.getMetrics TaskDuration), the rest of Chromium
// (browser + GPU + utility processes, same source), and ahpd's CPU s
// (utime + stime of /proc/PID/stat; the shell and cat are not in it).
// The page's receive window: at the key, at its largest during the run
// and at the end (window.ahpTest.receiveWindow(), polled every 50 ms),
// and how many times the page changed it (channel/window).
//
// Through a link (--links, issue 40): for each link other than "none"
// (loopback, no emulator) the benchmark starts bench/linkemu
// (-rtt RTT -rate --rate [-queue --queue]) in front of its own ahpd,
// which it starts with --public-url http://EMULATOR/ (ahpd checks Origin
// and Host, as predict.test.mjs does), and the page is loaded through the
// emulator's address: every byte between the page and ahpd crosses the
// emulated link. All the daemons and emulators start before the first
// round and serve every round. Each row then also has the link's time
// for the file's bytes (--size over --rate: what the link needs to carry
// the cat's output once, framing aside) and the page's time over it,
// against issue 40's target (the last line within 1.3 x the link's time,
// with at most 2 snapshots).
//
// Flags (also BENCH_* environment, see below):
//   --rounds N        rounds (default 3)
//   --windows LIST    page receive windows, comma-separated, bytes or
//                     KiB/MiB, or "default": no ?window=, the page's own
//                     adaptive window (default 256KiB,1MiB,4MiB,16MiB,32MiB)
//   --links LIST      round trips of emulated links, comma-separated
//                     (0, 20ms, 80ms, 200ms; a bare number is ms), or
//                     "none": loopback without an emulator (default none)
//   --rate RATE       the links' bandwidth each way (default 100mbit;
//                     as linkemu -rate: 100mbit, 12.5MB)
//   --queue SIZE      the links' bottleneck queue (default: linkemu's,
//                     one bandwidth-delay product, at least 64 KiB)
//   --pace RATE       instead of `cat FILE`, a writer paced to RATE
//                     (bytes/s as --rate: 5MB; a perl loop, 16 KiB writes
//                     on a schedule): a producer the page can keep up
//                     with, to see whether it still gets snapshots; each
//                     row then also has the writer's own time, SIZE / RATE
//   --frame SIZE      ?frame= for every page run (default: the page's)
//   --message SIZE    ?message= (default: the page's)
//   --renderer R      default (the page's own choice: WebGL on a GPU, the
//                     DOM renderer on a software rasterizer, as headless
//                     Chromium without a GPU has: SwiftShader), dom
//                     (?renderer=dom) or webgl (?renderer=webgl: WebGL even
//                     on SwiftShader, 4-20x slower here)
//   --size SIZE       the file (default 64MiB)
//   --timeout S       bound of one page run (default 120)
//   --json FILE       also write every row as JSON lines
//   --calibrate       first measure xterm.js alone in the page, without the
//                     daemon's stream: its parse rate (20 MB of the file's
//                     lines in 512 Ki-character writes, twice: cold, warm)
//                     and what a snapshot of a full scrollback costs it
//                     (10,040 lines written after term.reset(), as a
//                     snapshot is, against the same into a full buffer)
//   --profile PREFIX  write each page run's CPU profile (CDP Profiler, the
//                     page's main thread) to PREFIX-rR-LINK-wW.cpuprofile and
//                     print its top functions by self time
//
// Binaries as in common.mjs (AHPD_BIN, CHROMIUM_BIN), AHPBENCH_BIN, the
// raw reader (default: ahpbench beside AHPD_BIN; make bench-browser builds
// it: go build -o bin/ ./bench/ahpbench), and LINKEMU_BIN, the link
// emulator (default: linkemu beside AHPD_BIN, else built with `go build
// ./bench/linkemu` into the run's temp directory). Loopback only; every
// wait is bounded. Wrap runs in `flock /tmp/ahp-bench.lock` on a shared
// machine (the Makefile target does).

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, open, readFile, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir, cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import { parseSize } from '../src/wire.js';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { AHPD_BIN, CHROMIUM_ARGS, CHROMIUM_BIN, printedLink, run, STEP_MS, within } from './common.mjs';

const AHPBENCH_BIN = resolve(process.env.AHPBENCH_BIN || join(AHPD_BIN, '../ahpbench'));
const REPO_ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../..');
const CHANNEL = 'ahp-terminal:/shell';
const PROMPT = 'bench$ ';
const LINE = 'the quick brown fox jumps over the lazy dog 0123456789 '.repeat(2) + '\n'; // 111 bytes, as termbench

const { values: opt } = parseArgs({
  options: {
    rounds: { type: 'string', default: process.env.BENCH_ROUNDS ?? '3' },
    windows: { type: 'string', default: process.env.BENCH_WINDOWS ?? '256KiB,1MiB,4MiB,16MiB,32MiB' },
    links: { type: 'string', default: process.env.BENCH_LINKS ?? 'none' },
    rate: { type: 'string', default: process.env.BENCH_RATE ?? '100mbit' },
    queue: { type: 'string', default: process.env.BENCH_QUEUE ?? '' },
    pace: { type: 'string', default: process.env.BENCH_PACE ?? '' },
    frame: { type: 'string', default: process.env.BENCH_FRAME ?? '' },
    message: { type: 'string', default: process.env.BENCH_MESSAGE ?? '' },
    renderer: { type: 'string', default: process.env.BENCH_RENDERER ?? 'default' },
    size: { type: 'string', default: process.env.BENCH_SIZE ?? '64MiB' },
    timeout: { type: 'string', default: process.env.BENCH_TIMEOUT ?? '120' },
    json: { type: 'string', default: process.env.BENCH_JSON ?? '' },
    profile: { type: 'string', default: process.env.BENCH_PROFILE ?? '' },
    calibrate: { type: 'boolean', default: process.env.BENCH_CALIBRATE === '1' },
  },
});

function bytes(s) {
  const n = parseSize(s.trim());
  if (n === null) throw new Error(`not a size: ${s} (bytes, or a number with KiB or MiB)`);
  return n;
}
const human = (n) => (n === null ? 'default' : n % (1 << 20) === 0 ? `${n >> 20} MiB` : n % 1024 === 0 ? `${n >> 10} KiB` : `${n} B`);
/** mib prints a window in MiB (the tuned ones are not round). */
const mib = (n) => (n == null ? '–' : n >= 1 << 20 ? `${(n / 1048576).toFixed(2)} MiB` : `${(n / 1024).toFixed(0)} KiB`);

/** rate reads a bandwidth as linkemu -rate does (100mbit, 12.5MB, 1MiB) into bytes/s. */
function rate(s) {
  const m = /^([0-9.]+)\s*(gbit|mbit|kbit|bit|gib|mib|kib|gb|mb|kb|b)?$/i.exec(s.trim());
  const f = m ? Number(m[1]) : NaN;
  const mult = { gbit: 1e9 / 8, mbit: 1e6 / 8, kbit: 1e3 / 8, bit: 1 / 8, gib: 2 ** 30, mib: 2 ** 20, kib: 1024, gb: 1e9, mb: 1e6, kb: 1e3, b: 1 }[(m?.[2] ?? 'b').toLowerCase()];
  if (!(f > 0)) throw new Error(`--rate ${s}: want e.g. 100mbit or 12.5MB (bytes/s)`);
  return f * mult;
}

/** link reads one --links entry: null for "none" (loopback), else the round trip in ms. */
function link(s) {
  const t = s.trim().toLowerCase();
  if (t === 'none' || t === 'loopback') return null;
  const m = /^([0-9.]+)(ms|s)?$/.exec(t);
  if (!m) throw new Error(`--links: not a round trip: ${s} (0, 20ms, 0.2s, or none)`);
  return Number(m[1]) * (m[2] === 's' ? 1000 : 1);
}
const linkName = (rtt) => (rtt === null ? 'loopback' : `${rtt} ms`);

const ROUNDS = Number(opt.rounds);
const WINDOWS = opt.windows.split(',').map((w) => (w.trim() === 'default' ? null : bytes(w)));
const LINKS = [...new Set(opt.links.split(',').map(link))];
const RATE = rate(opt.rate); // bytes/s
const PACE = opt.pace ? rate(opt.pace) : null; // bytes/s of the paced writer; null: cat
// PACER writes its file to stdout at ARGV[0] bytes/s: 16 KiB at a time, each when it is due.
const PACER = `use strict; use Time::HiRes qw(time sleep);
my ($rate, $f) = @ARGV; open(my $fh, '<', $f) or die "$f: $!"; binmode $fh; binmode STDOUT;
my ($t0, $n, $buf) = (time, 0, '');
while (my $k = read($fh, $buf, 16384)) {
  my $off = 0;
  while ($off < $k) { my $w = syswrite(STDOUT, $buf, $k - $off, $off); die "write: $!" unless defined $w; $off += $w; }
  $n += $k; my $d = $t0 + $n / $rate - time; sleep($d) if $d > 0;
}
`;
const SIZE = bytes(opt.size);
const RUN_MS = Number(opt.timeout) * 1000;
if (!(ROUNDS >= 1 && ROUNDS <= 50) || !(RUN_MS > 0) || WINDOWS.length === 0 || LINKS.length === 0) throw new Error('bad flags');
if (opt.queue) bytes(opt.queue);
if (!['default', 'dom', 'webgl'].includes(opt.renderer)) throw new Error(`--renderer ${opt.renderer}: default, dom or webgl`);
for (const [what, bin, how] of [['browser', CHROMIUM_BIN, 'apt-get install chromium'], ['daemon', AHPD_BIN, 'make build'],
  ['raw reader', AHPBENCH_BIN, 'go build -o bin/ ./bench/ahpbench, or set AHPBENCH_BIN']]) {
  if (!existsSync(bin)) throw new Error(`bench-cat: no ${what} at ${bin} (${how}; make bench-browser builds all three)`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (s) => process.stderr.write(`${new Date().toISOString().slice(11, 23)} ${s}\n`);

// ---- the file ----------------------------------------------------------------

/** writeFile writes size bytes of LINE lines whose last line is marker. */
async function writeTestFile(path, size, marker) {
  const tail = marker + '\n';
  const lines = Math.floor((size - tail.length) / LINE.length);
  const pad = size - tail.length - lines * LINE.length; // < one line: its own line of x
  const f = await open(path, 'w', 0o600);
  try {
    const chunk = LINE.repeat(8192);
    let left = lines;
    while (left > 0) {
      const k = Math.min(left, 8192);
      await f.write(k === 8192 ? chunk : LINE.repeat(k));
      left -= k;
    }
    if (pad > 0) await f.write(pad === 1 ? '\n' : 'x'.repeat(pad - 1) + '\n');
    await f.write(tail);
  } finally {
    await f.close();
  }
}

// ---- processes ---------------------------------------------------------------

const CLK_TCK = 100; // USER_HZ on Linux

/** procCPU returns utime + stime of pid in seconds (not its children). */
async function procCPU(pid) {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / CLK_TCK; // fields 14 and 15
}

/** rawRead runs `ahpbench -rawread FILE` once and returns its seconds; bounded by RUN_MS. */
function rawRead(file) {
  return new Promise((res, rej) => {
    const p = spawn(AHPBENCH_BIN, ['-rawread', file], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.setEncoding('utf8').on('data', (d) => { out += d; });
    p.stderr.setEncoding('utf8').on('data', (d) => { err += d; });
    const timer = setTimeout(() => p.kill('SIGKILL'), RUN_MS);
    p.on('error', rej);
    p.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (code !== 0) return rej(new Error(`${AHPBENCH_BIN} -rawread: exit ${code ?? signal}\n${err}`));
      let r;
      try {
        r = JSON.parse(out); // {bytes, nanoseconds, cpuNanoseconds}: termbench.RawReading
      } catch (e) {
        return rej(new Error(`${AHPBENCH_BIN} -rawread said ${JSON.stringify(out)}: ${e.message}`));
      }
      if (!(r.bytes >= SIZE)) return rej(new Error(`raw read: ${r.bytes} of ${SIZE} bytes`));
      res(r.nanoseconds / 1e9);
    });
  });
}

/** freePort returns a loopback port nobody listens on (for ahpd behind an emulator). */
function freePort() {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.on('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => res(port));
    });
  });
}

/** linkemuBin returns the link emulator: LINKEMU_BIN, linkemu beside AHPD_BIN, or one built into tmp. */
async function linkemuBin(tmp) {
  if (process.env.LINKEMU_BIN) return resolve(process.env.LINKEMU_BIN);
  const beside = join(AHPD_BIN, '../linkemu');
  if (existsSync(beside)) return beside;
  const bin = join(tmp, 'linkemu');
  log('building bench/linkemu (set LINKEMU_BIN to skip)');
  await run('go', ['build', '-C', REPO_ROOT, '-o', bin, './bench/linkemu'], { GOFLAGS: '-tags=grpcnotrace' }, 180_000);
  return bin;
}

/**
 * startLink starts the emulator in front of 127.0.0.1:port for a link of
 * rtt ms at RATE and resolves with its process and address.
 */
function startLink(bin, port, rtt) {
  const args = ['-target', `127.0.0.1:${port}`, '-rtt', `${rtt}ms`, '-rate', `${RATE}B`];
  if (opt.queue) args.push('-queue', `${bytes(opt.queue)}B`);
  const emu = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  return within(STEP_MS, 'the link emulator to listen', new Promise((res, rej) => {
    let buf = '';
    emu.stdout.setEncoding('utf8').on('data', (d) => {
      buf += d;
      const m = /linkemu listening on (\S+)/.exec(buf);
      if (m) res({ emu, addr: m[1], args });
    });
    emu.stderr.setEncoding('utf8').on('data', (d) => log(`linkemu (${rtt} ms): ${d.trim()}`));
    emu.on('error', rej);
    emu.on('exit', (c, sig) => rej(new Error(`linkemu exited ${c ?? sig}: ${buf}`)));
  })).catch((e) => {
    emu.kill('SIGKILL');
    throw e;
  });
}

/**
 * startDaemon starts an ahpd for one link (rtt null: loopback) and returns
 * what a page run needs: {rtt, daemon, emu, base, admin, daemonPid}.
 */
async function startDaemon(tmp, home, shrc, rtt, emuBin) {
  const dir = join(tmp, rtt === null ? 'loopback' : `link-${rtt}ms`);
  await mkdir(dir, { recursive: true });
  const env = { rtt, daemon: null, emu: null, out: [] };
  let listen = '127.0.0.1:0';
  const extra = [];
  if (rtt !== null) {
    // The emulator dials the daemon per connection, so it starts first and
    // the daemon is told its address as the URL browsers open (publicUrl:
    // the page's Origin and Host are the emulator's).
    const port = await freePort();
    listen = `127.0.0.1:${port}`;
    const l = await startLink(emuBin, port, rtt);
    env.emu = l.emu;
    env.emuArgs = l.args;
    extra.push('--public-url', `http://${l.addr}/`);
  }
  env.daemon = spawn(AHPD_BIN, ['--listen', listen, ...extra, '--state-dir', join(dir, 'state'), '--control', join(dir, 'control.sock'), '--print-link'], {
    cwd: home,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: home, SHELL: '/bin/sh', ENV: shrc, PS1: PROMPT, LANG: 'C.UTF-8', TZ: 'UTC' },
  });
  const exited = new Promise((res) => env.daemon.on('exit', (code, signal) => res({ code, signal })));
  env.daemon.stdout.setEncoding('utf8').on('data', (d) => env.out.push(d));
  const url = await printedLink(env.daemon, env.out, exited);
  env.base = new URL(url).origin;
  env.admin = (await readFile(join(dir, 'state', 'admin.token'), 'utf8')).trim();
  env.daemonPid = env.daemon.pid;
  log(`${linkName(rtt)}: ahpd ${listen}${env.emu ? `, the page through linkemu ${env.emuArgs.join(' ')} at ${env.base}` : ''}`);
  return env;
}

async function stopEnv(env) {
  if (env.daemon && env.daemon.exitCode === null) {
    env.daemon.kill('SIGTERM');
    await within(STEP_MS, 'the daemon to exit', new Promise((r) => env.daemon.once('exit', r))).catch(() => env.daemon.kill('SIGKILL'));
  }
  if (env.emu && env.emu.exitCode === null) {
    env.emu.kill('SIGTERM');
    await within(STEP_MS, 'linkemu to exit', new Promise((r) => env.emu.once('exit', r))).catch(() => env.emu.kill('SIGKILL'));
  }
}

// ---- the page run ------------------------------------------------------------

/** chromeCPU returns the renderer processes' and the other processes' CPU seconds. */
async function chromeCPU(browserCdp) {
  const { processInfo } = await browserCdp.send('SystemInfo.getProcessInfo');
  let renderer = 0;
  let other = 0;
  for (const p of processInfo) {
    if (p.type === 'renderer') renderer += p.cpuTime;
    else other += p.cpuTime;
  }
  return { renderer, other };
}

async function taskDuration(cdp) {
  const { metrics } = await cdp.send('Performance.getMetrics');
  return metrics.find((m) => m.name === 'TaskDuration')?.value ?? NaN;
}

// armWatch runs in the page: it starts the clock when xterm hands the page
// the Enter key, and stops it at the first render after a parse that left
// marker in the viewport (visibleAt: with a snapshot's preview, on the
// alternate screen where the preview is drawn), and at the first render
// after a parse that left it in the normal screen's viewport (completeAt:
// the snapshot applied, its scrollback complete; the same as visibleAt
// without a preview). window.__bench holds the result.
function armWatch(marker) {
  const term = window.ahpTest.term;
  const b = { t0: null, parsedAt: null, visibleAt: null, normalAt: null, completeAt: null, resetAt: null, between: 0, disposables: [] };
  window.__bench = b;
  // The receive window (the page tunes it): its largest during the run.
  const win = () => window.ahpTest.receiveWindow?.() ?? null;
  b.windowMax = win();
  const poll = setInterval(() => { const w = win(); if (w !== null && (b.windowMax === null || w > b.windowMax)) b.windowMax = w; }, 50);
  b.disposables.push({ dispose: () => clearInterval(poll) });
  // resetAt: when the last snapshot began to apply (its term.reset()).
  const reset = term.reset;
  term.reset = function () {
    if (b.t0 !== null) b.resetAt = performance.now();
    return reset.apply(this, arguments);
  };
  b.disposables.push({ dispose: () => { term.reset = reset; } });
  const inViewport = () => {
    const buf = term.buffer.active;
    for (let y = term.rows - 1; y >= 0; y--) {
      if (buf.getLine(buf.viewportY + y)?.translateToString(true).includes(marker)) return true;
    }
    return false;
  };
  b.disposables.push(term.onData((d) => {
    if (b.t0 === null && d.includes('\r')) b.t0 = performance.now();
  }));
  b.disposables.push(term.onWriteParsed(() => {
    if (b.t0 === null || b.normalAt !== null || !inViewport()) return;
    const now = performance.now();
    b.parsedAt ??= now;
    if (term.buffer.active.type === 'normal') b.normalAt = now;
  }));
  b.disposables.push(term.onRender(() => {
    if (b.parsedAt !== null && b.visibleAt === null) b.visibleAt = performance.now();
    else if (b.visibleAt !== null && b.normalAt === null) b.between++; // frames drawn while the preview should hold
    if (b.normalAt === null || b.completeAt !== null) return;
    b.completeAt = performance.now();
    for (const d of b.disposables) d.dispose();
  }));
}

/** printProfile prints a CPU profile's top functions by self time (stderr). */
function printProfile(profile) {
  const dt = new Map(); // node id → µs
  for (let i = 0; i < profile.samples.length; i++) {
    dt.set(profile.samples[i], (dt.get(profile.samples[i]) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const self = new Map();
  let total = 0;
  for (const n of profile.nodes) {
    const us = dt.get(n.id) ?? 0;
    total += us;
    const f = n.callFrame;
    const key = `${f.functionName || '(anonymous)'} ${f.url.split('/').pop()}:${f.lineNumber + 1}:${f.columnNumber + 1}`;
    self.set(key, (self.get(key) ?? 0) + us);
  }
  const top = [...self].sort((a, b) => b[1] - a[1]).slice(0, 25);
  log(`profile: ${(total / 1e6).toFixed(2)} s sampled`);
  for (const [k, us] of top) log(`  ${(us / 1e3).toFixed(0).padStart(6)} ms ${(100 * us / total).toFixed(1).padStart(5)} %  ${k}`);
}

// calibrate runs in the page: xterm.js alone, fed from a string.
async function calibrateInPage() {
  const term = window.ahpTest.term;
  const line = 'the quick brown fox jumps over the lazy dog 0123456789 '.repeat(2) + '\r\n';
  const write = (s) => new Promise((res) => term.write(s, res));
  const out = { parseMBps: [], snapshotMs: [] };
  const chunk = line.repeat(Math.ceil(524288 / line.length));
  for (let pass = 0; pass < 2; pass++) {
    const n = Math.ceil(20e6 / chunk.length);
    const t0 = performance.now();
    for (let i = 0; i < n - 1; i++) term.write(chunk);
    await write(chunk);
    out.parseMBps.push(n * chunk.length / 1e6 / ((performance.now() - t0) / 1000));
  }
  const snap = line.repeat(10040); // 10,000 lines of scrollback + a 40-row screen
  for (let i = 0; i < 3; i++) {
    term.reset();
    let t = performance.now();
    await write(snap);
    const afterReset = performance.now() - t;
    t = performance.now();
    await write(snap);
    out.snapshotMs.push({ afterReset, intoFull: performance.now() - t });
  }
  term.reset();
  return out;
}

async function calibrate(ctx) {
  const q = new URLSearchParams();
  if (opt.renderer !== 'default') q.set('renderer', opt.renderer);
  const page = await ctx.context.newPage();
  try {
    await page.goto(`${ctx.base}/?${q}#token=${encodeURIComponent(ctx.admin)}&channel=${CHANNEL}`);
    await page.waitForFunction(() => window.ahpTest?.state().ready, null, { timeout: STEP_MS, polling: 50 });
    const r = await within(RUN_MS, 'the calibration', page.evaluate(calibrateInPage));
    const renderer = await page.evaluate(() => window.ahpTest.state().terminal.renderer);
    console.log(`\nxterm.js alone (${renderer} renderer): parse ${r.parseMBps.map((x) => x.toFixed(1)).join(', then ')} MB/s (cold, warm); ` +
      `10,040 lines after term.reset() ${r.snapshotMs.map((x) => x.afterReset.toFixed(0)).join(', ')} ms, ` +
      `into a full buffer ${r.snapshotMs.map((x) => x.intoFull.toFixed(0)).join(', ')} ms\n`);
  } finally {
    await page.close().catch(() => {});
  }
}

async function pageRun(ctx, env, windowBytes, file, marker) {
  const { context, browserCdp } = ctx;
  const { base, admin, daemonPid } = env;
  const q = new URLSearchParams(windowBytes === null ? {} : { window: String(windowBytes) });
  if (opt.frame) q.set('frame', String(bytes(opt.frame)));
  if (opt.message) q.set('message', String(bytes(opt.message)));
  if (opt.renderer !== 'default') q.set('renderer', opt.renderer);
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  try {
    await page.goto(`${base}/?${q}#token=${encodeURIComponent(admin)}&channel=${CHANNEL}`);
    await page.waitForFunction(() => {
      const s = window.ahpTest?.state();
      return s && s.connection === 'connected' && s.ready && s.subscriptionId != null;
    }, null, { timeout: STEP_MS, polling: 50 });
    const granted = await page.evaluate(() => window.ahpTest.state().receiveLimits);
    if (windowBytes !== null && granted.windowBytes !== windowBytes) throw new Error(`asked for window ${windowBytes}, granted ${JSON.stringify(granted)}`);
    // A clear screen and a prompt: no marker of an earlier run in view.
    await page.keyboard.type('clear', { delay: 5 });
    await page.keyboard.press('Enter');
    await page.waitForFunction((m) => {
      const t = window.ahpTest.screenText();
      return !t.includes(m) && t.trimEnd().endsWith('$');
    }, marker, { timeout: STEP_MS, polling: 50 });
    await page.keyboard.type(ctx.command, { delay: 5 });
    await sleep(300); // the echo of the command line is in; quiet before the clock starts
    const cdp = await context.newCDPSession(page);
    await cdp.send('Performance.enable');
    await page.evaluate(armWatch, marker);
    const before = {
      state: await page.evaluate(() => window.ahpTest.state()),
      task: await taskDuration(cdp),
      chrome: await chromeCPU(browserCdp),
      daemon: await procCPU(daemonPid),
    };
    if (ctx.profile) {
      await cdp.send('Profiler.enable');
      await cdp.send('Profiler.setSamplingInterval', { interval: 200 });
      await cdp.send('Profiler.start');
    }
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => window.__bench.completeAt !== null, null, { timeout: RUN_MS, polling: 100 });
    if (ctx.profile) {
      const { profile } = await cdp.send('Profiler.stop');
      await writeFile(`${ctx.profile}.cpuprofile`, JSON.stringify(profile));
      printProfile(profile);
    }
    const after = {
      state: await page.evaluate(() => window.ahpTest.state()),
      task: await taskDuration(cdp),
      chrome: await chromeCPU(browserCdp),
      daemon: await procCPU(daemonPid),
    };
    const b = await page.evaluate(() => {
      const { t0, parsedAt, visibleAt, completeAt, resetAt, between, windowMax } = window.__bench;
      return { t0, parsedAt, visibleAt, completeAt, resetAt, between, windowMax, windowEnd: window.ahpTest.receiveWindow?.() ?? null };
    });
    if (errors.length) throw new Error(`page errors: ${errors.join('; ')}`);
    const s0 = before.state;
    const s1 = after.state;
    return {
      seconds: (b.visibleAt - b.t0) / 1000,
      parsedSeconds: (b.parsedAt - b.t0) / 1000,
      completeSeconds: (b.completeAt - b.t0) / 1000,
      // from the last snapshot's reset to the last line on the screen
      // (NaN when there was no snapshot during the run)
      afterSnapshot: b.resetAt === null ? NaN : (b.visibleAt - b.resetAt) / 1000,
      completeAfterSnapshot: b.resetAt === null ? NaN : (b.completeAt - b.resetAt) / 1000,
      snapshots: s1.terminal.stream.resets - s0.terminal.stream.resets,
      previews: (s1.terminal.stream.previews ?? 0) - (s0.terminal.stream.previews ?? 0),
      framesBetween: b.between,
      outputMB: (s1.terminal.stream.outputChars - s0.terminal.stream.outputChars) / 1e6,
      messages: s1.terminal.stream.output - s0.terminal.stream.output,
      // A new subscription (the connection was lost and the page attached
      // again) restarts the subscription's counters.
      resubscribed: s1.subscriptionId !== s0.subscriptionId || s1.connection !== 'connected',
      credits: s1.subscriptionId === s0.subscriptionId ? s1.receiveStats.creditsSent - s0.receiveStats.creditsSent : NaN,
      pageCPU: after.chrome.renderer - before.chrome.renderer,
      mainThread: after.task - before.task,
      otherChromeCPU: after.chrome.other - before.chrome.other,
      daemonCPU: after.daemon - before.daemon,
      renderer: s1.terminal.renderer,
      size: `${s1.rows}x${s1.cols}`,
      granted,
      // the receive window: at the key, largest during the run, at the end; changes (channel/window)
      windowStart: s0.receiveLimits?.windowBytes ?? null,
      windowMax: Math.max(b.windowMax ?? 0, b.windowEnd ?? 0, s1.receiveLimits?.windowBytes ?? 0) || null,
      windowEnd: b.windowEnd ?? s1.receiveLimits?.windowBytes ?? null,
      windowChanges: s1.subscriptionId === s0.subscriptionId ? (s1.receiveStats?.windowChanges ?? 0) - (s0.receiveStats?.windowChanges ?? 0) : NaN,
      srttMs: s1.rtt?.srtt ?? null,
      minRttMs: s1.rtt?.min ?? null,
    };
  } catch (e) {
    await page.screenshot({ path: join(ctx.tmp, 'failure.png') }).catch(() => {});
    const screen = await page.evaluate(() => window.ahpTest?.screenText()).catch(() => '');
    throw new Error(`${e.message.split('\n')[0]}\nscreen:\n${screen}`);
  } finally {
    await page.close().catch(() => {});
  }
}

// ---- main ----------------------------------------------------------------------

async function main() {
  const { chromium } = await import('playwright-core');
  const tmp = await mkdtemp(join(tmpdir(), 'ahpd-bench-cat-'));
  const home = join(tmp, 'home');
  await mkdir(home, { recursive: true });
  const shrc = join(home, 'shrc');
  await writeFile(shrc, `PS1='${PROMPT}'\n`);
  const marker = `AHP-BENCH-END-${randomBytes(6).toString('hex')}`;
  const file = join(tmp, 'cat.txt');
  await writeTestFile(file, SIZE, marker);
  let command = `cat ${file}`;
  if (PACE !== null) {
    await writeFile(join(tmp, 'pace.pl'), PACER);
    command = `perl ${join(tmp, 'pace.pl')} ${Math.round(PACE)} ${file}`;
  }

  const envs = new Map(); // link rtt (null: loopback) → its daemon and emulator
  let browser = null;
  try {
    const emuBin = LINKS.some((l) => l !== null) ? await linkemuBin(tmp) : null;
    for (const rtt of LINKS) envs.set(rtt, await startDaemon(tmp, home, shrc, rtt, emuBin));
    browser = await chromium.launch({ executablePath: CHROMIUM_BIN, args: CHROMIUM_ARGS, timeout: 30_000 });
    const context = await browser.newContext({ viewport: { width: 1100, height: 640 }, deviceScaleFactor: 1 });
    context.setDefaultTimeout(STEP_MS);
    const browserCdp = await browser.newBrowserCDPSession();
    const ctx = { context, browserCdp, tmp, profile: '', command };

    const [l1, l5] = loadavg();
    const linked = LINKS.filter((l) => l !== null);
    console.log(`# bench-cat ${new Date().toISOString()}: ${human(SIZE)} file, ${ROUNDS} round(s), windows ${WINDOWS.map(human).join(', ')}` +
      `${opt.frame ? `, frame ${opt.frame}` : ''}${opt.message ? `, message ${opt.message}` : ''}, renderer ${opt.renderer}` +
      `${PACE === null ? '' : `, paced to ${(PACE / 1e6).toFixed(2)} MB/s (${(SIZE / PACE).toFixed(2)} s for the file)`}, links ${LINKS.map(linkName).join(', ')}${linked.length ? ` (linkemu at ${(RATE * 8 / 1e6).toFixed(1)} Mbit/s each way, queue ${opt.queue || 'one BDP, at least 64 KiB'}; the link's time for the file ${(SIZE / RATE).toFixed(2)} s)` : ''}; ` +
      `${cpus().length} CPUs, load average ${l1.toFixed(2)} / ${l5.toFixed(2)} (1 / 5 min) before`);
    if (opt.calibrate) await calibrate({ ...ctx, ...envs.get(LINKS[0]) });
    const configs = LINKS.flatMap((rtt) => WINDOWS.map((w) => ({ rtt, w })));
    const rows = [];
    for (let r = 0; r < ROUNDS; r++) {
      const order = configs.map((_, i) => configs[(i + r) % configs.length]);
      for (const { rtt, w } of order) {
        const raw = await rawRead(file);
        log(`round ${r + 1} ${linkName(rtt)} window ${human(w)}: raw ${raw.toFixed(2)} s`);
        ctx.profile = opt.profile ? `${opt.profile}-r${r + 1}-${rtt === null ? 'lo' : `${rtt}ms`}-w${w ?? 'default'}` : '';
        const p = await within(RUN_MS + 4 * STEP_MS, 'a page run', pageRun(ctx, envs.get(rtt), w, file, marker));
        const linkSeconds = rtt === null ? NaN : SIZE / RATE;
        const row = { round: r + 1, rtt, window: w, raw, ...p, ratio: p.seconds / raw, linkSeconds, linkRatio: p.seconds / linkSeconds, at: new Date().toISOString(), load1: loadavg()[0] };
        log(`  page ${p.seconds.toFixed(2)} s (${row.ratio.toFixed(2)}× raw${rtt === null ? '' : `, ${row.linkRatio.toFixed(2)}× the link's ${linkSeconds.toFixed(2)} s`}), ${p.snapshots} snapshot(s), ${p.previews} with a preview (last line ${p.afterSnapshot.toFixed(2)} s after the last one's reset, applied ${p.completeAfterSnapshot.toFixed(2)} s after it, ${p.framesBetween} frame(s) drawn between), ${p.outputMB.toFixed(1)} MB parsed, ` +
          `window ${mib(p.windowStart)} → max ${mib(p.windowMax)}, end ${mib(p.windowEnd)} (${p.windowChanges} change(s)), srtt ${p.srttMs?.toFixed(1) ?? '–'} ms (min ${p.minRttMs?.toFixed(1) ?? '–'}), ` +
          `page CPU ${p.pageCPU.toFixed(2)} s, ahpd ${p.daemonCPU.toFixed(2)} s, ${p.renderer}, ${p.size}${p.resubscribed ? ', RESUBSCRIBED (connection lost during the run)' : ''}`);
        rows.push(row);
        if (opt.json) await writeFile(opt.json, JSON.stringify(row) + '\n', { flag: 'a' });
      }
    }
    printTable(rows);
    const [e1] = loadavg();
    console.log(`\nload average after: ${e1.toFixed(2)}; terminal ${rows[0].size} (rows x cols), renderer ${rows[0].renderer}`);
  } finally {
    await browser?.close().catch(() => {});
    for (const env of envs.values()) await stopEnv(env);
    await rm(tmp, { recursive: true, force: true });
  }
}

const med = (a) => { const s = [...a].sort((x, y) => x - y); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
/** mr prints a median and its range: "1.23 (1.10–1.40)". */
const mr = (a, d = 2, f = (x) => x.toFixed(d)) => (a.length === 1 ? f(a[0]) : `${f(med(a))} (${f(Math.min(...a))}–${f(Math.max(...a))})`);

function printTable(rows) {
  console.log('\n| round | link | window | raw read s | page s (last line on screen) | page / raw | / the link\'s time | snapshot applied s | snapshots (with a preview) | MB parsed | credits | window: max, end (changes) | srtt ms | page CPU s | main thread s | rest of Chromium CPU s | ahpd CPU s |');
  console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    console.log(`| ${r.round} | ${linkName(r.rtt)} | ${human(r.window)} | ${r.raw.toFixed(2)} | ${r.seconds.toFixed(2)} | ${r.ratio.toFixed(2)} | ${r.rtt === null ? '–' : r.linkRatio.toFixed(2)} | ${r.completeSeconds.toFixed(2)} | ${r.snapshots} (${r.previews}) | ` +
      `${r.outputMB.toFixed(1)} | ${r.resubscribed ? 'resubscribed' : r.credits} | ${mib(r.windowMax)}, ${mib(r.windowEnd)} (${r.windowChanges}) | ${r.srttMs?.toFixed(1) ?? '–'} | ${r.pageCPU.toFixed(2)} | ${r.mainThread.toFixed(2)} | ${r.otherChromeCPU.toFixed(2)} | ${r.daemonCPU.toFixed(2)} |`);
  }
  console.log('\nmedian (min–max) per link and window:\n');
  const paced = PACE === null ? '' : ` / the writer's ${(SIZE / PACE).toFixed(2)} s |`;
  console.log(`| link | window | the link's time for the bytes s | page: last line s | / the link's time | target ≤ 1.3× | snapshots | target ≤ 2 | MB parsed | page / raw | snapshot applied / raw | window at the end | page CPU s | ahpd CPU s |${paced}`);
  console.log(`|---:|---:|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|${paced ? '---:|' : ''}`);
  for (const rtt of LINKS) {
    for (const w of WINDOWS) {
      const rs = rows.filter((r) => r.rtt === rtt && r.window === w);
      if (!rs.length) continue;
      const ls = rs[0].linkSeconds;
      const ratio = med(rs.map((r) => r.linkRatio));
      const snaps = med(rs.map((r) => r.snapshots));
      const t1 = rtt === null ? '–' : ratio <= 1.3 ? 'met' : `not met: ${(ratio / 1.3).toFixed(2)}× over`;
      const t2 = snaps <= 2 ? 'met' : `not met: ${snaps - 2} over`;
      console.log(`| ${linkName(rtt)} | ${human(w)} | ${rtt === null ? '–' : ls.toFixed(2)} | ${mr(rs.map((r) => r.seconds))} | ${rtt === null ? '–' : mr(rs.map((r) => r.linkRatio))} | ${t1} | ` +
        `${mr(rs.map((r) => r.snapshots), 0)} | ${t2} | ${mr(rs.map((r) => r.outputMB), 1)} | ${mr(rs.map((r) => r.ratio))} | ${mr(rs.map((r) => r.completeSeconds / r.raw))} | ${mr(rs.map((r) => r.windowEnd ?? NaN), 0, mib)} | ` +
        `${mr(rs.map((r) => r.pageCPU))} | ${mr(rs.map((r) => r.daemonCPU))} |${paced ? ` ${mr(rs.map((r) => r.seconds * PACE / SIZE))} |` : ''}`);
    }
  }
}

main().catch((e) => {
  console.error(`bench-cat: ${e.stack || e.message}`);
  process.exit(1);
});
