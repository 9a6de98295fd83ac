// telemetry.test.mjs — telemetry in a real browser: bin/ahpd with a push
// telemetry channel fed 1,000 samples/s through `ahpctl telemetry push` by
// a node producer (push-producer.mjs), and a process channel of the
// daemon's terminal, shown by the page in headless Debian Chromium
// (playwright-core). Run with `make e2e` or `npm run e2e` after `make build`.
//
// It checks that the terminal's status line shows its processes' CPU
// sparkline and RSS, that the telemetry channel draws points, that the page
// draws at least 900 of the 1,000 samples/s pushed, that the JS heap stays
// flat while the source runs, and that a stalled main thread (a busy loop,
// so no frame is drawn and no credit released) comes back as
// telemetry/dropped drawn as a gap with a lost-samples counter equal to the
// model's. It prints the soak's figures (heap at its start and end, samples/s
// drawn) as test diagnostics and in telemetry-e2e.log.
//
// Environment: as browser.test.mjs (AHPD_BIN, AHPCTL_BIN, CHROMIUM_BIN,
// ARTIFACTS_DIR, CI), plus
//   TELEMETRY_SOAK_SECONDS  how long the heap is watched (default 20; 600 is
//                           the 10-minute run: TELEMETRY_SOAK_SECONDS=600 npm run e2e)
//   TELEMETRY_HEAP_BOUND_MIB how much the heap may grow over it (default 4)
//   TELEMETRY_RATE           samples/s the producer pushes (default 1000)
//
// Every wait is bounded; with the default soak the test takes about 40 s
// and has a 60 s budget (the soak's length more with a longer soak).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AHPCTL_BIN, AHPD_BIN, ARTIFACTS_DIR, CHROMIUM_ARGS, CHROMIUM_BIN, CI, run, scratch, startDaemon, STEP_MS, waitFor } from './common.mjs';

const SOAK_S = Number(process.env.TELEMETRY_SOAK_SECONDS || 20);
const HEAP_BOUND = Number(process.env.TELEMETRY_HEAP_BOUND_MIB || 4) * 1024 * 1024;
const RATE = Number(process.env.TELEMETRY_RATE || 1000);
// The page must draw this share of what is pushed: a push source stamps
// samples as ahpctl reads them and nothing is lost before the stall.
const MIN_RATE = 0.9 * RATE;

const ARTIFACTS = ['telemetry.png', 'telemetry-light.png', 'terminal-process.png', 'telemetry-failure.png',
  'telemetry-daemon.log', 'telemetry-e2e.log'];
const TERMINAL = 'ahp-terminal:/shell';
const TELEMETRY = 'ahp-telemetry:/e2e';
const LAUNCH_MS = 20_000;

// The source: push-producer.mjs writes sample lines (`e2e_wave V phase=a`
// for four phases of a triangle wave, `e2e_walk V` a random walk: 5 samples
// a tick, 200 ticks a second at 1,000/s) every ~10 ms into the stdin of
// `ahpctl telemetry push`. It is bounded: it stops by itself after the
// test's budget, and the test kills it at the end.
const PRODUCER = fileURLToPath(new URL('./push-producer.mjs', import.meta.url));

const missing = !existsSync(CHROMIUM_BIN) ? `no browser at ${CHROMIUM_BIN} (apt-get install chromium)`
  : !existsSync(AHPD_BIN) ? `no daemon at ${AHPD_BIN} (make build)`
    : !existsSync(AHPCTL_BIN) ? `no ahpctl at ${AHPCTL_BIN} (make build)` : null;
if (missing && CI) throw new Error(`e2e: ${missing}`);

test('browser: telemetry charts, gaps for dropped ranges, flat heap; process sparkline', {
  skip: missing ?? false,
  timeout: 60_000 + Math.max(0, SOAK_S - 20) * 1000,
}, async (t) => {
  const { chromium } = await import('playwright-core');
  const { tmp, home } = await scratch('ahpd-e2e-tel-', ARTIFACTS);
  const stateDir = join(tmp, 'state');
  const controlSock = join(tmp, 'control.sock');

  const t0 = Date.now();
  const log = [];
  const note = (line) => log.push(`${new Date().toISOString()} +${((Date.now() - t0) / 1000).toFixed(1)}s ${line}`);
  const daemonOut = [];
  let daemon = null;
  let browser = null;
  let page = null;
  let passed = false;
  let producer = null;
  let pusher = null;
  const pushErr = [];
  t.after(async () => {
    // The producer prints its count and exits; the pipe closes, so ahpctl
    // sends what it has, prints its summary and exits.
    producer?.kill('SIGTERM');
    if (pusher && pusher.exitCode === null && pusher.signalCode === null) {
      await Promise.race([new Promise((r) => pusher.once('exit', r)), sleep(2000)]);
      if (pusher.exitCode === null && pusher.signalCode === null) pusher.kill('SIGKILL');
    }
    if (producer && producer.exitCode === null && producer.signalCode === null) {
      await Promise.race([new Promise((r) => producer.once('exit', r)), sleep(1000)]);
      producer.kill('SIGKILL');
    }
    note(`producer and ahpctl telemetry push: ${pushErr.join('').trim()}`);
    if (!passed && page && !page.isClosed()) {
      await page.screenshot({ path: join(ARTIFACTS_DIR, 'telemetry-failure.png'), timeout: 3000 }).catch(() => {});
    }
    await browser?.close().catch(() => {});
    if (daemon && daemon.exitCode === null) daemon.kill('SIGKILL');
    await writeFile(join(ARTIFACTS_DIR, 'telemetry-daemon.log'), daemonOut.join('')).catch(() => {});
    await writeFile(join(ARTIFACTS_DIR, 'telemetry-e2e.log'), log.join('\n') + '\n').catch(() => {});
    await rm(tmp, { recursive: true, force: true });
  });

  // ---- the daemon and its channels --------------------------------------------

  let link;
  ({ daemon, link } = startDaemon(home, ['--listen', '127.0.0.1:0', '--state-dir', stateDir, '--control', controlSock, '--print-link'], daemonOut));
  const url = await link;
  note(`daemon at ${new URL(url).origin}`);
  const ctl = (...args) => run(AHPCTL_BIN, args, { AHP_CONTROL: controlSock });
  const procUri = (await ctl('telemetry', 'create', '--kind', 'process', '--terminal', TERMINAL,
    '--interval', '250ms', '--id', 'shellproc')).trim();
  const telUri = (await ctl('telemetry', 'create', '--kind', 'push', '--id', 'e2e')).trim();
  assert.equal(telUri, TELEMETRY);
  note(`channels ${procUri} ${telUri}`);
  // The producer runs from now (its samples until the telemetry view opens
  // are the channel's history, the view's initial replay) to the end of the
  // test's budget at most.
  producer = spawn(process.execPath, [PRODUCER, String(RATE), String(SOAK_S + 120)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  pusher = spawn(AHPCTL_BIN, ['telemetry', 'push', telUri], {
    stdio: ['pipe', 'ignore', 'pipe'],
    env: { ...process.env, AHP_CONTROL: controlSock },
  });
  producer.stdout.pipe(pusher.stdin);
  pusher.stdin.on('error', () => {}); // ahpctl gone: its exit is checked below
  for (const p of [producer, pusher]) p.stderr.setEncoding('utf8').on('data', (d) => pushErr.push(d));
  const pushAlive = () => assert.ok(pusher.exitCode === null && pusher.signalCode === null,
    `ahpctl telemetry push exited (${pusher.exitCode ?? pusher.signalCode}): ${pushErr.join('')}`);

  // ---- the browser ----------------------------------------------------------------

  browser = await chromium.launch({ executablePath: CHROMIUM_BIN, args: CHROMIUM_ARGS, timeout: LAUNCH_MS });
  const context = await browser.newContext({ viewport: { width: 1280, height: 760 }, deviceScaleFactor: 1 });
  context.setDefaultTimeout(STEP_MS);
  page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`uncaught ${e.message}`));
  page.on('console', (m) => {
    note(`console.${m.type()}: ${m.text()}`);
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });
  // The printed ticket is scoped to the terminal; the channel list is
  // filtered by the token, so the page uses the admin token (all channels).
  const admin = (await readFile(join(stateDir, 'admin.token'), 'utf8')).trim();
  await page.goto(`${new URL(url).origin}/#token=${encodeURIComponent(admin)}&channel=${TERMINAL}`);
  await waitFor(page, 'the terminal to attach', () => {
    const s = window.ahpTest?.state();
    return s && s.connection === 'connected' && s.ready && s.view === 'terminal';
  });
  note('terminal attached');

  // ---- the terminal's process telemetry in the status line --------------------------
  // The page lists channels every 5 s (and at attach): the process channel
  // existed before the page opened, so it is found at once.

  await waitFor(page, 'the status line to show the process CPU and RSS', () => {
    const s = window.ahpTest.state();
    const cpu = document.querySelector('[data-testid=status-cpu]')?.textContent ?? '';
    const rss = document.querySelector('[data-testid=status-rss]')?.textContent ?? '';
    return s.process && s.process.drawn > 0 && /^CPU \d/.test(cpu) && /^RSS \d/.test(rss) &&
      Number(document.querySelector('[data-testid=status-process]').dataset.points) >= 2;
  });
  const procState = await page.evaluate(() => window.ahpTest.state().process);
  note(`process status: ${JSON.stringify(procState)}`);
  assert.equal(procState.channel, procUri);
  assert.ok(procState.rss > 0, `RSS ${procState.rss}`);
  assert.ok(procState.receive.creditSent > 0, 'the process subscription never credited');
  assert.equal(await page.getByTestId('status-sparkline').isVisible(), true);
  // Load in the terminal shows in its sparkline: a one-second busy loop.
  await page.getByTestId('terminal').click();
  await page.keyboard.type("timeout 1 sh -c 'while :; do :; done'", { delay: 2 });
  await page.keyboard.press('Enter');
  await waitFor(page, 'the busy loop in the CPU sparkline', () => {
    const p = window.ahpTest.state().process;
    return p && p.cpuMax > 0.3;
  });
  await page.getByTestId('status').screenshot({ path: join(ARTIFACTS_DIR, 'terminal-process.png') });

  // ---- the telemetry channel in the list, then its charts ------------------------

  const item = page.locator(`[data-testid=channel-item][data-channel="${TELEMETRY}"]`);
  await item.waitFor({ timeout: STEP_MS });
  assert.equal(await item.getAttribute('data-type'), 'telemetry');
  await item.locator('button').click();
  await waitFor(page, 'the telemetry view to attach and draw points', () => {
    const s = window.ahpTest.state();
    return s.view === 'telemetry' && s.ready && s.telemetry?.charts.length === 2 &&
      s.telemetry.charts.every((c) => c.drawnPoints > 0);
  });
  assert.equal(await page.evaluate(() => window.ahpTest.state().process), null, 'the sparkline belongs to the terminal');
  let st = await page.evaluate(() => window.ahpTest.state());
  note(`telemetry attached: ${JSON.stringify(st.telemetry)}`);
  assert.deepEqual(st.telemetry.charts.map((c) => c.name).sort(), ['e2e_walk', 'e2e_wave']);
  // Series are in the order they first appear, and the replay may begin with
  // any batch (a batch boundary can fall inside one tick's four lines), so
  // the set is compared, not the order.
  assert.deepEqual([...st.telemetry.charts.find((c) => c.name === 'e2e_wave').series].sort(), ['phase=a', 'phase=b', 'phase=c', 'phase=d']);
  assert.equal(await page.getByTestId('telemetry-chart').count(), 2);
  assert.equal(await page.locator('[data-testid=telemetry-chart] canvas').first().isVisible(), true);

  // ---- heap at ~1,000 samples/s, once the rings are full --------------------------
  // The channel's history (the initial replay: the seconds since it was
  // created) usually fills them at once.

  await waitFor(page, 'the rings to fill', () =>
    window.ahpTest.state().telemetry.charts.every((c) => c.points === c.capacity), undefined, 15_000);
  const cdp = await context.newCDPSession(page);
  const heap = async () => {
    await cdp.send('HeapProfiler.collectGarbage');
    return (await cdp.send('Runtime.getHeapUsage')).usedSize;
  };
  const samplesNow = () => page.evaluate(() => window.ahpTest.state().telemetry.stats.samples);
  const s0 = await samplesNow();
  const h0 = await heap();
  const w0 = Date.now();
  const heaps = [h0];
  note(`soak: ${SOAK_S} s from heap ${mib(h0)}`);
  while (Date.now() - w0 < SOAK_S * 1000) {
    await sleep(Math.min(2000, SOAK_S * 1000 - (Date.now() - w0) + 10));
    heaps.push(await heap());
  }
  const s1 = await samplesNow();
  const rate = ((s1 - s0) * 1000) / (Date.now() - w0);
  st = await page.evaluate(() => window.ahpTest.state());
  note(`soak: ${rate.toFixed(0)} samples/s drawn; heap ${heaps.map(mib).join(' ')}; ${JSON.stringify(st.telemetry.stats)}`);
  const figures = `soak ${SOAK_S} s at ${RATE} samples/s pushed: ${rate.toFixed(0)} samples/s drawn; ` +
    `heap ${mib(h0)} at the start, ${mib(heaps[heaps.length - 1])} at the end, peak ${mib(Math.max(...heaps))}`;
  t.diagnostic(figures);
  console.log(`telemetry e2e: ${figures}`);
  pushAlive();
  assert.ok(rate >= MIN_RATE, `the page drew ${rate.toFixed(0)} samples/s of the ${RATE} pushed, want ≥ ${MIN_RATE}`);
  assert.ok(st.telemetry.charts.every((c) => c.points === c.capacity), 'the rings must stay at their capacity');
  const grown = heaps[heaps.length - 1] - h0;
  assert.ok(grown < HEAP_BOUND, `heap grew ${mib(grown)} over ${SOAK_S} s (${heaps.map(mib).join(' ')})`);
  const peak = Math.max(...heaps) - h0;
  assert.ok(peak < HEAP_BOUND, `heap peaked ${mib(peak)} above the start`);

  // ---- a stalled page gets telemetry/dropped, drawn as a gap -------------------------
  // A busy main thread draws no frame, so nothing is released; the host's
  // window closes, its queue for this viewer (1 MiB) overflows and it drops
  // the oldest batches. The stall is sized from the measured byte rate.

  const dropsBefore = st.telemetry.stats.droppedMessages;
  const rates = () => page.evaluate(() => {
    const s = window.ahpTest.state();
    return { bytes: s.receive.receivedBytes, batches: s.telemetry.stats.batches, at: performance.now() };
  });
  const r0 = await rates();
  await sleep(1000);
  const r1 = await rates();
  const dt = (r1.at - r0.at) / 1000;
  const byteRate = Math.max(1, (r1.bytes - r0.bytes) / dt);
  const batchRate = Math.max(1, (r1.batches - r0.batches) / dt);
  // The viewer's queue holds 512 batches or 1 MiB, whichever is reached
  // first (docs/protocol-decisions.md), behind the 64 KiB window. fillS is
  // where it is just full, so the stall is half as long again plus a second:
  // with the push source (~155 kB/s, ~50 batches/s) a stall of fillS, 7 s,
  // dropped nothing, one of 12 s drops ~250 batches.
  const fillS = Math.min((1024 * 1024) / byteRate, 512 / batchRate) + (64 * 1024) / byteRate;
  const stallMs = Math.min(15_000, Math.max(3000, Math.round(1000 * (1.5 * fillS + 1))));
  note(`stall: ${byteRate.toFixed(0)} bytes/s, ${batchRate.toFixed(0)} batches/s received; busy loop ${stallMs} ms`);
  await page.evaluate((ms) => {
    const end = performance.now() + ms;
    while (performance.now() < end) { /* busy: no frame, no credit */ }
  }, stallMs);
  await waitFor(page, 'telemetry/dropped drawn as a gap', () => {
    const s = window.ahpTest.state().telemetry;
    return s.stats.droppedMessages > 0 && s.stats.lostSamples > 0 &&
      s.charts.every((c) => c.gaps > 0 && c.nullRows > 0);
  });
  st = await page.evaluate(() => window.ahpTest.state());
  note(`after the stall: ${JSON.stringify(st.telemetry.stats)}`);
  assert.ok(st.telemetry.stats.droppedMessages > dropsBefore);
  const lostText = await page.getByTestId('telemetry-lost').textContent();
  const lostAttr = Number(await page.getByTestId('telemetry-lost').getAttribute('data-lost'));
  assert.ok(lostAttr > 0, `lost counter ${lostAttr}`);
  assert.match(lostText, /^lost [\d,]+ samples? in \d+ gaps?$/);
  // The counter shows the model's count (read together: a range that
  // arrives between two reads would make them differ).
  await waitFor(page, 'the lost counter equal to the samples the model lost', () =>
    Number(document.querySelector('[data-testid="telemetry-lost"]').getAttribute('data-lost')) ===
      window.ahpTest.state().telemetry.stats.lostSamples);
  // The charts keep drawing after the gap.
  const drawn = st.telemetry.stats.samples;
  await waitFor(page, 'samples after the gap', (n) => window.ahpTest.state().telemetry.stats.samples > n + 200, drawn);
  await page.screenshot({ path: join(ARTIFACTS_DIR, 'telemetry.png') });
  // The light theme recolours the charts' axes and grid at their next draw.
  await page.getByTestId('theme-toggle').click();
  await waitFor(page, 'the light theme', () => document.documentElement.dataset.theme === 'light');
  await page.waitForTimeout(300); // a few frames of live samples
  await page.screenshot({ path: join(ARTIFACTS_DIR, 'telemetry-light.png') });
  await page.getByTestId('theme-toggle').click();

  // ---- back to the terminal: its view and its sparkline return --------------------

  await page.locator(`[data-testid=channel-item][data-channel="${TERMINAL}"] button`).click();
  await waitFor(page, 'the terminal again, with its process status', () => {
    const s = window.ahpTest.state();
    return s.view === 'terminal' && s.ready && s.channel === 'ahp-terminal:/shell' && s.telemetry === null &&
      s.process?.drawn > 0 && document.querySelector('[data-testid=terminal]').offsetHeight > 0 &&
      document.querySelector('.tele-host').hidden;
  });

  pushAlive();
  assert.deepEqual(problems, [], 'the page logged errors');
  note('passed');
  passed = true;
});

// ---- helpers ----------------------------------------------------------------

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const mib = (b) => `${(b / 1048576).toFixed(2)}MiB`;



