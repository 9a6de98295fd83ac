// telemetry-bench.mjs — what the telemetry charts cost the page, in real
// headless Chromium (issue 41): a channel of 1,000 series against a
// baseline of 8 series in the same run. Not a test (make test does not run
// it):
//
//   make build && cd daemon/webui && node e2e/telemetry-bench.mjs --fill
//   node e2e/telemetry-bench.mjs --warmup 10 --seconds 20 --json out.jsonl
//   node e2e/telemetry-bench.mjs --only 3 --fill --profile prof.txt --trace trace.txt
//
// --fill waits (at most 150 s) until the chart's ring is full (1,200 rows)
// where the rate allows it; --only picks rows by index; --profile appends
// the page's top functions by self time (CDP Profiler) and --trace its
// top trace events (CDP Tracing: layout, commit, canvas), for each row.
//
// Each row is a fresh push channel (`ahpctl telemetry push`, no history)
// fed one collection of SERIES samples of one metric name (`bench_series
// {i=…}`, all with one time) every 1000/HZ ms, and a fresh tab showing it.
// After --warmup seconds the page is measured for --seconds:
//
//   renderer CPU   the tab's renderer process, all threads (CDP
//                  SystemInfo.getProcessInfo), as % of one core
//   main busy      its main thread's tasks (CDP Performance.getMetrics
//                  TaskDuration), % of one core
//   frames/s       animation frames the page ran (a requestAnimationFrame
//                  loop in the page), and the longest gap between two
//   samples/s      samples the charts applied (the view's counters)
//   rows           rows held in the chart's ring at the end (1,200 at most)
//   toggle ms      "+K more" clicked to the next frame: the chart re-ranked,
//                  its legend rebuilt and redrawn (median of 5 clicks each way)
//   heap MiB       the JS heap after a collection, at the end
//   lost           samples the daemon dropped for this viewer (telemetry/dropped)
//
// Rows: 8 series at 10 Hz (the baseline), 1,000 series at 1 Hz (a scrape
// of a big exporter), 1,000 at 10 Hz, and 1,000 at 10 Hz with the chart
// expanded (64 lines, the legend listing them).
//
// Environment: AHPD_BIN, AHPCTL_BIN, CHROMIUM_BIN as the e2e tests
// (e2e/common.mjs). Every wait is bounded.

import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, appendFile } from 'node:fs/promises';
import { loadavg, tmpdir, cpus } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { AHPCTL_BIN, AHPD_BIN, CHROMIUM_ARGS, CHROMIUM_BIN, printedLink, run, STEP_MS, waitFor } from './common.mjs';

const { values: opt } = parseArgs({
  options: {
    warmup: { type: 'string', default: process.env.BENCH_WARMUP || '15' },
    seconds: { type: 'string', default: process.env.BENCH_SECONDS || '20' },
    json: { type: 'string', default: process.env.BENCH_JSON || '' },
    only: { type: 'string', default: '' },
    profile: { type: 'string', default: '' },
    fill: { type: 'boolean', default: false },
    trace: { type: 'string', default: '' },
  },
});
const WARMUP_S = Number(opt.warmup);
const MEASURE_S = Number(opt.seconds);
const FILL_MAX_S = 150;

const ROWS = [
  { name: 'baseline: 8 series × 10 Hz', series: 8, hz: 10, expand: false },
  { name: '1,000 series × 1 Hz, top 8', series: 1000, hz: 1, expand: false },
  { name: '1,000 series × 10 Hz, top 8', series: 1000, hz: 10, expand: false },
  { name: '1,000 series × 10 Hz, expanded (64 lines)', series: 1000, hz: 10, expand: true },
].filter((r, i) => !opt.only || opt.only.split(',').includes(String(i)));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const tmp = await mkdtemp(join(tmpdir(), 'ahpd-bench-charts-'));
  const home = join(tmp, 'home');
  const stateDir = join(tmp, 'state');
  const controlSock = join(tmp, 'control.sock');
  await mkdir(home, { recursive: true });
  const daemonOut = [];
  const daemon = spawn(AHPD_BIN, ['--listen', '127.0.0.1:0', '--state-dir', stateDir, '--control', controlSock, '--print-link'], {
    cwd: home, stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: home, SHELL: '/bin/sh', LANG: 'C.UTF-8', TZ: 'UTC' },
  });
  daemon.stdout.setEncoding('utf8').on('data', (s) => daemonOut.push(s));
  const exited = new Promise((res) => daemon.on('exit', (code, signal) => res({ code, signal })));
  const browser = await chromium.launch({ executablePath: CHROMIUM_BIN, args: CHROMIUM_ARGS, timeout: 20_000 });
  const results = [];
  try {
    const url = await printedLink(daemon, daemonOut, exited);
    const ctl = (...args) => run(AHPCTL_BIN, args, { AHP_CONTROL: controlSock });
    const admin = (await readFile(join(stateDir, 'admin.token'), 'utf8')).trim();
    const browserCdp = await browser.newBrowserCDPSession();
    console.log(`telemetry-bench: ${cpus().length} CPUs (${cpus()[0]?.model}), load ${loadavg().map((l) => l.toFixed(2)).join(' ')}; warm-up ${WARMUP_S} s, measured ${MEASURE_S} s per row`);
    let n = 0;
    for (const row of ROWS) {
      const id = `bench${++n}`;
      const uri = (await ctl('telemetry', 'create', '--kind', 'push', '--id', id, '--history', '0')).trim();
      const r = await measure({ browser, browserCdp, url, admin, uri, controlSock, row });
      results.push(r);
      console.log(JSON.stringify(r));
      if (opt.json) await appendFile(opt.json, JSON.stringify(r) + '\n');
      await ctl('channels', 'close', uri).catch(() => {});
    }
  } finally {
    await browser.close().catch(() => {});
    daemon.kill('SIGTERM');
    await Promise.race([exited, sleep(3000)]);
    if (daemon.exitCode === null) daemon.kill('SIGKILL');
    await rm(tmp, { recursive: true, force: true });
  }
  console.log('\n| setup | renderer CPU | main busy | frames/s (longest gap) | chart redraws/s | samples/s drawn | rows | toggle ms | heap MiB | lost |');
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of results) {
    console.log(`| ${r.name} | ${r.rendererPct.toFixed(1)} % | ${r.mainPct.toFixed(1)} % | ${r.fps.toFixed(0)} (${r.maxGapMs.toFixed(0)} ms) | ` +
      `${r.drawsPerSecond.toFixed(0)} | ${Math.round(r.samplesPerSecond).toLocaleString('en-US')} | ${r.rows} | ${r.toggleMs == null ? '-' : r.toggleMs.toFixed(1)} | ${r.heapMiB.toFixed(1)} | ${r.lost} |`);
  }
}

async function measure({ browser, browserCdp, url, admin, uri, controlSock, row }) {
  // The producer: SERIES JSON lines, one time each collection, every 1000/HZ ms.
  const pusher = spawn(AHPCTL_BIN, ['telemetry', 'push', uri], { stdio: ['pipe', 'ignore', 'pipe'], env: { ...process.env, AHP_CONTROL: controlSock } });
  pusher.stdin.on('error', () => {});
  let k = 0;
  const collect = () => {
    const t = Date.now();
    k++;
    let out = '';
    for (let i = 0; i < row.series; i++) {
      // Values that keep their order mostly, with some series overtaking.
      const v = i + 50 * Math.sin(k / 20 + i) + (i % 97 === 0 ? 400 * Math.sin(k / 50) : 0);
      out += `{"t":${t},"name":"bench_series","value":${v.toFixed(3)},"labels":{"i":"${i}"}}\n`;
    }
    pusher.stdin.write(out);
  };
  const timer = setInterval(collect, 1000 / row.hz);
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1 });
  context.setDefaultTimeout(STEP_MS);
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  try {
    await page.goto(`${new URL(url).origin}/#token=${encodeURIComponent(admin)}&channel=${uri}`);
    await waitFor(page, 'the chart', () => {
      const s = window.ahpTest?.state();
      return s?.view === 'telemetry' && s.telemetry?.charts[0]?.drawnPoints > 0;
    }, undefined, 20_000);
    if (row.expand) {
      await page.locator('[data-testid=legend-more]').click();
      await waitFor(page, 'the chart expanded', () => window.ahpTest.state().telemetry.charts[0].expanded);
    }
    await page.evaluate(() => {
      const f = (window.__benchFrames = { n: 0, last: 0, maxGap: 0 });
      const loop = (t) => {
        if (f.last) f.maxGap = Math.max(f.maxGap, t - f.last);
        f.last = t;
        f.n++;
        requestAnimationFrame(loop);
      };
      requestAnimationFrame(loop);
    });
    await sleep(WARMUP_S * 1000);
    if (opt.fill && row.hz * FILL_MAX_S >= 1200) {
      // Until the ring is full (1,200 rows), at most FILL_MAX_S: what a page open for a while draws.
      const t0 = Date.now();
      while (Date.now() - t0 < FILL_MAX_S * 1000) {
        const c = await page.evaluate(() => window.ahpTest.state().telemetry.charts[0]);
        if (c.points >= c.capacity) break;
        await sleep(1000);
      }
    }
    const cdp = await context.newCDPSession(page);
    await cdp.send('Performance.enable');
    const pid = await rendererPid(browserCdp, page);
    const snap = async () => {
      const { processInfo } = await browserCdp.send('SystemInfo.getProcessInfo');
      const cpu = processInfo.find((p) => p.id === pid)?.cpuTime ?? NaN;
      const { metrics } = await cdp.send('Performance.getMetrics');
      const task = metrics.find((m) => m.name === 'TaskDuration')?.value ?? NaN;
      const st = await page.evaluate(() => {
        const f = window.__benchFrames;
        const s = window.ahpTest.state().telemetry;
        const g = { frames: f.n, maxGap: f.maxGap, samples: s.stats.samples, rows: s.charts[0].points, draws: s.charts[0].draws, lost: s.stats.lostSamples, dropped: s.stats.droppedMessages };
        f.maxGap = 0;
        return g;
      });
      return { at: performance.now(), cpu, task, ...st };
    };
    if (opt.profile) {
      await cdp.send('Profiler.enable');
      await cdp.send('Profiler.start');
    }
    let traced = null;
    if (opt.trace) {
      // The renderer's own time by trace event (what "(program)" in a profile is).
      const events = [];
      cdp.on('Tracing.dataCollected', (d) => events.push(...d.value));
      traced = new Promise((res) => cdp.once('Tracing.tracingComplete', () => res(events)));
      await cdp.send('Tracing.start', { categories: 'devtools.timeline,disabled-by-default-devtools.timeline,toplevel,cc,blink,gpu,skia', transferMode: 'ReportEvents' });
    }
    const a = await snap();
    await sleep(MEASURE_S * 1000);
    const b = await snap();
    if (traced) {
      await cdp.send('Tracing.end');
      const events = await traced;
      const self = new Map();
      for (const e of events) {
        if (e.ph !== 'X' || !e.dur) continue;
        const key = `${e.name} [${e.tid}]`;
        self.set(key, (self.get(key) ?? 0) + e.dur);
      }
      const top = [...self].sort((x, y) => y[1] - x[1]).slice(0, 30);
      await appendFile(opt.trace, `${row.name}\n${top.map(([k, v]) => `${(v / 1000).toFixed(0).padStart(7)} ms  ${k}`).join('\n')}\n\n`);
    }
    if (opt.profile) {
      const { profile } = await cdp.send('Profiler.stop');
      const self = new Map();
      const byId = new Map(profile.nodes.map((nd) => [nd.id, nd]));
      const dt = profile.timeDeltas;
      profile.samples.forEach((id, i) => {
        const nd = byId.get(id);
        const key = `${nd.callFrame.functionName || '(anon)'} ${nd.callFrame.url.split('/').pop()}:${nd.callFrame.lineNumber}`;
        self.set(key, (self.get(key) ?? 0) + (dt[i] ?? 0));
      });
      const top = [...self].sort((x, y) => y[1] - x[1]).slice(0, 25);
      await appendFile(opt.profile, `${row.name}\n${top.map(([k, v]) => `${(v / 1000).toFixed(0).padStart(7)} ms  ${k}`).join('\n')}\n\n`);
    }
    const wall = (b.at - a.at) / 1000;
    // "+K more" both ways: the click's handler re-ranks and redraws at once.
    const toggles = [];
    for (let i = 0; i < 10; i++) {
      toggles.push(await page.evaluate(() => new Promise((res) => {
        const t0 = performance.now();
        document.querySelector('[data-testid=legend-more]').click();
        requestAnimationFrame(() => res(performance.now() - t0));
      })));
      await sleep(100);
    }
    toggles.sort((x, y) => x - y);
    await cdp.send('HeapProfiler.collectGarbage');
    const heap = (await cdp.send('Runtime.getHeapUsage')).usedSize;
    return {
      name: row.name, series: row.series, hz: row.hz, expanded: row.expand,
      seconds: wall,
      rendererPct: (100 * (b.cpu - a.cpu)) / wall,
      mainPct: (100 * (b.task - a.task)) / wall,
      fps: (b.frames - a.frames) / wall,
      drawsPerSecond: (b.draws - a.draws) / wall,
      maxGapMs: b.maxGap,
      samplesPerSecond: (b.samples - a.samples) / wall,
      rows: b.rows,
      toggleMs: row.series > 8 ? toggles[Math.floor(toggles.length / 2)] : null,
      heapMiB: heap / 1048576,
      lost: b.lost,
      droppedMessages: b.dropped,
      errors,
    };
  } finally {
    clearInterval(timer);
    pusher.stdin.end();
    await Promise.race([new Promise((r) => pusher.once('exit', r)), sleep(2000)]);
    if (pusher.exitCode === null) pusher.kill('SIGKILL');
    await context.close().catch(() => {});
  }
}

// rendererPid finds the renderer process of page: the one renderer whose
// CPU time the page's own busy loop moves.
async function rendererPid(browserCdp, page) {
  const cpuOf = async () => {
    const { processInfo } = await browserCdp.send('SystemInfo.getProcessInfo');
    return new Map(processInfo.filter((p) => p.type === 'renderer').map((p) => [p.id, p.cpuTime]));
  };
  const before = await cpuOf();
  await page.evaluate(() => {
    const end = performance.now() + 300;
    while (performance.now() < end) { /* busy: mark this renderer */ }
  });
  const after = await cpuOf();
  let best = null;
  let most = -1;
  for (const [id, c] of after) {
    const d = c - (before.get(id) ?? 0);
    if (d > most) {
      most = d;
      best = id;
    }
  }
  return best;
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
