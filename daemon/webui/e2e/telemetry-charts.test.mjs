// telemetry-charts.test.mjs — the telemetry charts as a reader sees them,
// in headless Debian Chromium (issue 41). bin/ahpd with a push channel fed
// through `ahpctl telemetry push`: ten minutes of history with explicit
// times, one every 5 s (a network rate around 0.9–2.9 MiB/s, four CPU
// shares, 20 series of one name, a metric with a single sample, and a
// minute's pause of the source), then live samples every 500 ms.
//
// At 320, 768 and 1280 px it reads every axis label the page drew on the
// canvases (telemetry.js layout(): each fillText with its measured box)
// and checks that each is whole (inside its canvas, and the canvas inside
// its card), that no two overlap, that a chart has at least two labels on
// each axis, and that a y axis writes one unit with labels that differ. It
// also checks the legend (last values; the value under the pointer), the
// top 8 of 20 series with "+12 more" expanding to all, the single sample
// drawn as a dot, the pause as a break in the lines, the header's rate
// counting live samples only (not the replayed history), and the sidebar
// showing a terminal's long title whole (an ellipsis in the middle, its
// end and the full title on hover).
//
// The same checks at 768 px on a 2x screen (canvas pixels twice the CSS
// pixels). Screenshots: artifacts/telemetry-charts-{320,768,1280}.png,
// telemetry-charts-320-net.png, telemetry-charts-768-2x.png,
// telemetry-charts-expanded.png, telemetry-charts-hover.png,
// telemetry-charts-sidebar.png.
//
// A second test starts ahpd as make run does (--daemon-telemetry) and opens
// its printed link: without a click the page shows the terminal and,
// beside it (under it on a narrow window), the charts of ahp-telemetry:/ahpd
// with data; at 320, 768 and 1280 px nothing is wider than the window (the
// status line included), the terminal has at least 20 columns at the size
// that fits what the panel leaves (stty size says so) and the panel's axis
// labels pass the same checks; closed, the panel stays closed after a
// reload; the status line's "charts" opens it again and its title opens
// the channel in full. Screenshots: artifacts/chart-panel-{320,768,1280}.png,
// chart-panel-closed.png, chart-panel-reopened.png.
//
// Environment: as browser.test.mjs (AHPD_BIN, AHPCTL_BIN, CHROMIUM_BIN,
// ARTIFACTS_DIR, CI). Every wait is bounded; it takes about 20 s (and 10 s
// the second test).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AHPCTL_BIN, AHPD_BIN, ARTIFACTS_DIR, CHROMIUM_ARGS, CHROMIUM_BIN, CI, run, scratch, startDaemon, STEP_MS, waitFor } from './common.mjs';

const CHANNEL_ID = 'charts-of-a-long-push-channel-name-0042';
const CHANNEL = `ahp-telemetry:/${CHANNEL_ID}`;
const WIDTHS = [320, 768, 1280];
const LAUNCH_MS = 20_000;
const MiB = 1024 * 1024;
const HISTORY_S = 600;
const HISTORY_STEP_S = 5; // a sample each 5 s: the replay fits a viewer's queue (1 MiB)
const PAUSE = [300, 240]; // seconds ago: no samples between
const MANY = 20;
// A terminal whose title is too long for the sidebar.
const LONG_TITLE = 'make -j8 of the ahpd daemon on the long-running ci-runner-0042';
const LONG_URI = 'ahp-terminal:/build';
const LIVE_MS = 500;
const ARTIFACTS = ['telemetry-charts-320.png', 'telemetry-charts-768.png', 'telemetry-charts-1280.png',
  'telemetry-charts-320-net.png', 'telemetry-charts-768-2x.png', 'telemetry-charts-hover.png',
  'telemetry-charts-expanded.png', 'telemetry-charts-sidebar.png', 'telemetry-charts-failure.png',
  'telemetry-charts-daemon.log', 'telemetry-charts-e2e.log'];

const missing = !existsSync(CHROMIUM_BIN) ? `no browser at ${CHROMIUM_BIN} (apt-get install chromium)`
  : !existsSync(AHPD_BIN) ? `no daemon at ${AHPD_BIN} (make build)`
    : !existsSync(AHPCTL_BIN) ? `no ahpctl at ${AHPCTL_BIN} (make build)` : null;
if (missing && CI) throw new Error(`e2e: ${missing}`);

// tick returns the JSON sample lines of one time t (ms), k seconds into the history.
function tick(t, k, { lonely = false } = {}) {
  const out = [];
  const line = (name, value, labels) => out.push(JSON.stringify({ name, value, t, labels }));
  // The chart: 2.72, 1.81, 0.91 MiB/s were drawn as "72 MiB/s…".
  line('net_receive_bytes_per_second', (1.9 + Math.sin(k / 40)) * MiB, { if: 'eth0' });
  line('net_receive_bytes_per_second', (0.2 + 0.1 * Math.cos(k / 17)) * MiB, { if: 'lo' });
  for (let c = 0; c < 4; c++) line('cpu_usage_ratio', Math.max(0, Math.min(1, 0.15 * c + 0.1 + 0.08 * Math.sin(k / 9 + c))), { cpu: String(c) });
  for (let i = 0; i < MANY; i++) line('many_series', 100 * i + 10 * Math.sin(k / 5 + i), { i: String(i).padStart(2, '0') });
  if (lonely) line('lonely_count', 42);
  return out.join('\n') + '\n';
}

test('browser: telemetry charts read right at 320, 768 and 1280 px', {
  skip: missing ?? false,
  timeout: 90_000,
}, async (t) => {
  const { chromium } = await import('playwright-core');
  const { tmp, home } = await scratch('ahpd-e2e-charts-', ARTIFACTS);
  const stateDir = join(tmp, 'state');
  const controlSock = join(tmp, 'control.sock');
  const daemonOut = [];
  const log = [];
  const note = (s) => log.push(`${new Date().toISOString()} ${s}`);
  let daemon = null;
  let browser = null;
  let page = null;
  let pusher = null;
  let live = null;
  let passed = false;
  t.after(async () => {
    clearInterval(live);
    pusher?.stdin.end();
    if (pusher && pusher.exitCode === null) {
      await Promise.race([new Promise((r) => pusher.once('exit', r)), sleep(2000)]);
      if (pusher.exitCode === null) pusher.kill('SIGKILL');
    }
    if (!passed && page && !page.isClosed()) {
      await page.screenshot({ path: join(ARTIFACTS_DIR, 'telemetry-charts-failure.png'), timeout: 3000 }).catch(() => {});
    }
    await browser?.close().catch(() => {});
    if (daemon && daemon.exitCode === null) daemon.kill('SIGKILL');
    await writeFile(join(ARTIFACTS_DIR, 'telemetry-charts-daemon.log'), daemonOut.join('')).catch(() => {});
    await writeFile(join(ARTIFACTS_DIR, 'telemetry-charts-e2e.log'), log.join('\n') + '\n').catch(() => {});
    await rm(tmp, { recursive: true, force: true });
  });

  // ---- the daemon, the channel and its history ------------------------------------

  let link;
  ({ daemon, link } = startDaemon(home, ['--listen', '127.0.0.1:0', '--state-dir', stateDir, '--control', controlSock, '--print-link'], daemonOut));
  const url = await link;
  const ctl = (...args) => run(AHPCTL_BIN, args, { AHP_CONTROL: controlSock });
  assert.equal((await ctl('telemetry', 'create', '--kind', 'push', '--id', CHANNEL_ID, '--history', '20m')).trim(), CHANNEL);
  await ctl('terminal', 'create', '--id', 'build', '--title', LONG_TITLE, '--', 'sleep', '120');
  pusher = spawn(AHPCTL_BIN, ['telemetry', 'push', CHANNEL], { stdio: ['pipe', 'ignore', 'pipe'], env: { ...process.env, AHP_CONTROL: controlSock } });
  const pushErr = [];
  pusher.stderr.setEncoding('utf8').on('data', (d) => pushErr.push(d));
  pusher.stdin.on('error', () => {});
  const now0 = Date.now();
  let history = '';
  let historySamples = 0;
  for (let k = 0; k <= HISTORY_S; k += HISTORY_STEP_S) {
    const ago = HISTORY_S - k;
    if (ago < PAUSE[0] && ago > PAUSE[1]) continue; // the source paused
    const lines = tick(now0 - ago * 1000, k, { lonely: k === 100 });
    historySamples += lines.split('\n').length - 1;
    history += lines;
  }
  pusher.stdin.write(history);
  let k = HISTORY_S;
  live = setInterval(() => {
    k++;
    pusher.stdin.write(tick(Date.now(), k));
  }, LIVE_MS);
  const liveRate = (tick(0, 0).split('\n').length - 1) * (1000 / LIVE_MS);
  note(`history: ${historySamples} samples; live ${liveRate} samples/s`);

  // ---- the page --------------------------------------------------------------------

  browser = await chromium.launch({ executablePath: CHROMIUM_BIN, args: CHROMIUM_ARGS, timeout: LAUNCH_MS });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1, timezoneId: 'UTC' });
  context.setDefaultTimeout(STEP_MS);
  page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`uncaught ${e.message}`));
  page.on('console', (m) => {
    note(`console.${m.type()}: ${m.text()}`);
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });
  const admin = (await readFile(join(stateDir, 'admin.token'), 'utf8')).trim();
  await sleep(1500); // ahpctl sends the history (16,000 lines) in well under this
  await page.goto(`${new URL(url).origin}/#token=${encodeURIComponent(admin)}&channel=${CHANNEL}`);
  await waitFor(page, 'the telemetry view with its four charts drawn', () => {
    const s = window.ahpTest?.state();
    return s && s.view === 'telemetry' && s.ready && s.telemetry?.charts.length === 4 &&
      s.telemetry.charts.every((c) => c.drawnPoints > 0);
  });
  let st = await page.evaluate(() => window.ahpTest.state().telemetry);
  note(`attached: ${JSON.stringify({ stats: st.stats, charts: st.charts.map((c) => [c.name, c.points, c.shown.length, c.pauses]) })}`);
  await waitFor(page, 'the replay to reach back to the start of the history', (t0) =>
    window.ahpTest.state().telemetry.charts.find((c) => c.name === 'net_receive_bytes_per_second').first <= t0, now0 - (HISTORY_S - 5) * 1000);

  // ---- the header's rate: live samples only -----------------------------------------

  await waitFor(page, 'the header to show a rate', () => /samples\/s/.test(document.querySelector('[data-testid=telemetry-rate]').textContent));
  const rateText = await page.getByTestId('telemetry-rate').textContent();
  const rate = Number(rateText.replace(/[^\d.]/g, ''));
  note(`header rate: ${rateText} (live ${liveRate}/s, history ${historySamples})`);
  assert.ok(rate <= liveRate * 2 + 10, `the header says ${rateText} with ${liveRate} live samples/s: the replay counted`);

  // ---- the charts: a pause breaks the lines, one sample is a dot ---------------------------

  const chartOf = (s, name) => s.charts.find((c) => c.name === name);
  const net = chartOf(st, 'net_receive_bytes_per_second');
  assert.ok(net.pauses >= 1 && net.nullRows >= 1, `the pause is a gap: ${JSON.stringify(net)}`);
  assert.equal(net.gaps, 0, 'a pause is not a loss (no band)');
  const lonely = chartOf(st, 'lonely_count');
  assert.equal(lonely.points, 1);
  const dot = await page.evaluate(() => window.ahpTest.telemetry.layout().find((c) => c.name === 'lonely_count').dots);
  note(`lonely dot: ${JSON.stringify(dot)}`);
  assert.equal(dot.length, 1, 'one dot');
  assert.ok(dot[0].alpha > 0 && dot[0].colorDistance < 60, `the dot is drawn in its series' colour: ${JSON.stringify(dot[0])}`);

  // ---- the legend: last values, the top 8 of 20 -------------------------------------------

  let lay = await page.evaluate(() => window.ahpTest.telemetry.layout());
  const many = lay.find((c) => c.name === 'many_series');
  assert.equal(many.legend.length, 8, 'top 8 drawn');
  assert.deepEqual(many.legend.map((r) => r.label), [19, 18, 17, 16, 15, 14, 13, 12].map((i) => `i=${i}`), 'ranked by recent value');
  for (const c of lay) {
    for (const r of c.legend) assert.match(r.value, /\d/, `${c.name} ${r.label}: the legend shows the last value, not "${r.value}"`);
  }
  const netLegend = lay.find((c) => c.name === 'net_receive_bytes_per_second').legend;
  assert.ok(netLegend.every((r) => / (KiB|MiB)\/s$/.test(r.value)), JSON.stringify(netLegend));
  assert.equal(await page.locator('[data-name=many_series] [data-testid=legend-more]').textContent(), '+12 more');

  // ---- the axes at three widths ------------------------------------------------------------

  for (const width of WIDTHS) {
    await page.setViewportSize({ width, height: 900 });
    await waitFor(page, `the charts resized to ${width} px`, () =>
      window.ahpTest.telemetry.layout().every((c) => c.root.right <= c.host.right + 0.5 && c.root.left >= c.host.left - 0.5 &&
        Math.abs(c.canvas.cssWidth - (c.host.right - c.host.left)) < 2));
    await sleep(200); // a frame or two of live samples
    lay = await page.evaluate(() => window.ahpTest.telemetry.layout());
    note(`${width} px: ${JSON.stringify(lay.map((c) => ({ name: c.name, canvas: c.canvas, axes: c.axes.map((a) => a.values) })))}`);
    for (const c of lay) checkAxes(c, width);
    const overflow = await page.evaluate(() => ({
      head: document.querySelector('.tele-head').scrollWidth - document.querySelector('.tele-head').clientWidth,
      wide: [...document.querySelectorAll('.tele-host *')].filter((e) => e.getBoundingClientRect().right > innerWidth + 0.5)
        .slice(0, 8).map((e) => `${e.tagName.toLowerCase()}.${e.className} ${Math.round(e.getBoundingClientRect().right)}`) }));
    // (The status line's own width is not this test's: only the telemetry view is checked.)
    assert.ok(overflow.wide.length === 0 && overflow.head <= 0, `${width} px: the telemetry view is wider than the window: ${JSON.stringify(overflow)}`);
    await page.screenshot({ path: join(ARTIFACTS_DIR, `telemetry-charts-${width}.png`), fullPage: true });
    // The page scrolls inside .tele-host: a shot of each card as well at the narrowest.
    if (width === 320) {
      await page.locator('[data-name=net_receive_bytes_per_second]').screenshot({ path: join(ARTIFACTS_DIR, 'telemetry-charts-320-net.png') });
    }
  }

  // ---- a HiDPI screen: canvas pixels are twice the CSS pixels ---------------------------------

  {
    const hi = await browser.newContext({ viewport: { width: 768, height: 900 }, deviceScaleFactor: 2, timezoneId: 'UTC' });
    const p2 = await hi.newPage();
    p2.on('pageerror', (e) => problems.push(`uncaught (2x) ${e.message}`));
    await p2.goto(`${new URL(url).origin}/#token=${encodeURIComponent(admin)}&channel=${CHANNEL}`);
    await waitFor(p2, 'the charts at 2x', () => {
      const s = window.ahpTest?.state();
      return s?.view === 'telemetry' && s.telemetry?.charts.length === 4 && s.telemetry.charts.every((c) => c.drawnPoints > 0);
    });
    const lay2 = await p2.evaluate(() => window.ahpTest.telemetry.layout());
    for (const c of lay2) {
      assert.equal(c.pxRatio, 2);
      checkAxes(c, '768 (2x)');
    }
    await p2.locator('[data-name=net_receive_bytes_per_second]').screenshot({ path: join(ARTIFACTS_DIR, 'telemetry-charts-768-2x.png') });
    await hi.close();
  }

  // ---- hover: the value under the pointer ---------------------------------------------------

  await page.setViewportSize({ width: 1280, height: 900 });
  const plot = page.locator('[data-name=net_receive_bytes_per_second] .u-over');
  await plot.waitFor();
  const box = await plot.boundingBox();
  await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2);
  await waitFor(page, 'the legend to follow the pointer', () =>
    document.querySelector('[data-name=net_receive_bytes_per_second] [data-testid=legend]').dataset.hover !== '');
  const hover = await page.evaluate(() => {
    const c = window.ahpTest.telemetry.layout().find((x) => x.name === 'net_receive_bytes_per_second');
    const chart = window.ahpTest.telemetry.model.chart('net_receive_bytes_per_second');
    return { idx: c.hover, legend: c.legend, want: c.legend.map((r) => chart.valueAt(chart.series.find((s) => s.label === r.label), c.hover)) };
  });
  note(`hover: ${JSON.stringify(hover)}`);
  assert.ok(hover.idx != null && hover.idx < (await page.evaluate(() => window.ahpTest.state().telemetry.charts[0].points)) - 5, 'hovering 30% in is not the last row');
  assert.deepEqual(hover.legend.map((r) => r.raw), hover.want.map((v) => (v == null ? null : v)), 'the legend shows the values at the pointer');
  await page.locator('[data-name=net_receive_bytes_per_second]').screenshot({ path: join(ARTIFACTS_DIR, 'telemetry-charts-hover.png') });
  await page.mouse.move(2, 2);
  await waitFor(page, 'the legend back to the last values', () =>
    document.querySelector('[data-name=net_receive_bytes_per_second] [data-testid=legend]').dataset.hover === '');

  // ---- "+12 more" expands to all 20 and back ------------------------------------------------

  await page.locator('[data-name=many_series] [data-testid=legend-more]').click();
  await waitFor(page, 'all 20 series drawn', () => {
    const c = window.ahpTest.state().telemetry.charts.find((x) => x.name === 'many_series');
    return c.shown.length === 20 && document.querySelectorAll('[data-name=many_series] [data-testid=legend-row]').length === 20;
  });
  await page.locator('[data-name=many_series]').screenshot({ path: join(ARTIFACTS_DIR, 'telemetry-charts-expanded.png') });
  assert.equal(await page.locator('[data-name=many_series] [data-testid=legend-more]').textContent(), 'show top 8');
  await page.locator('[data-name=many_series] [data-testid=legend-more]').click();
  await waitFor(page, 'the top 8 again', () =>
    window.ahpTest.state().telemetry.charts.find((x) => x.name === 'many_series').shown.length === 8);

  // ---- the sidebar: a channel's name whole ----------------------------------------------

  await waitFor(page, 'the long-titled terminal in the list', (ch) =>
    !!document.querySelector(`[data-testid=channel-item][data-channel="${ch}"] [data-testid=channel-name]`), LONG_URI);
  const name = await page.evaluate((ch) => {
    const t = document.querySelector(`[data-testid=channel-item][data-channel="${ch}"] [data-testid=channel-name]`);
    const head = t.querySelector('.head');
    const tail = t.querySelector('.tail');
    const tr = tail.getBoundingClientRect();
    const br = t.closest('button').getBoundingClientRect();
    return {
      text: t.textContent, title: t.title, tail: tail.textContent,
      headCut: head.scrollWidth > head.clientWidth, tailInside: tr.right <= br.right + 0.5 && tr.width > 0,
    };
  }, LONG_URI);
  note(`sidebar name: ${JSON.stringify(name)}`);
  assert.equal(name.text, LONG_TITLE);
  assert.ok(name.title.includes(LONG_TITLE) && name.title.includes(LONG_URI), `the full name on hover: ${name.title}`);
  assert.ok(name.tail.endsWith('0042') && name.tailInside, 'the end of the name is shown');
  assert.ok(name.headCut, 'the long name is cut in the middle');
  await page.locator('.sidebar').screenshot({ path: join(ARTIFACTS_DIR, 'telemetry-charts-sidebar.png') });

  st = await page.evaluate(() => window.ahpTest.state().telemetry);
  assert.equal(st.stats.droppedMessages, 0);
  assert.deepEqual(problems, [], 'the page logged errors');
  assert.ok(pusher.exitCode === null, `ahpctl telemetry push exited: ${pushErr.join('')}`);
  passed = true;
});

// checkAxes asserts that a chart's axis labels are whole and apart;
// minTime is the fewest time labels it takes (a young channel's few
// seconds may hold one round step at a narrow width).
function checkAxes(c, width, { minTime = 2 } = {}) {
  const where = `${c.name} at ${width} px`;
  const labels = c.texts.filter((x) => x.kind === 'axis');
  assert.ok(labels.length > 0, `${where}: no labels drawn`);
  const x = c.axes[0].values.filter((v) => v != null);
  const y = c.axes[1].values.filter((v) => v != null);
  assert.ok(x.length >= minTime, `${where}: ${x.length} time labels`);
  assert.ok(y.length >= 2, `${where}: ${y.length} value labels`);
  assert.deepEqual(labels.map((l) => l.text).sort(), [...x, ...y].sort(), `${where}: the labels drawn are the axes' values`);
  for (const l of labels) {
    assert.ok(l.left >= 0 && l.top >= 0 && l.right <= c.canvas.width && l.bottom <= c.canvas.height,
      `${where}: "${l.text}" is clipped: ${JSON.stringify(l)} in ${c.canvas.width}x${c.canvas.height}`);
  }
  for (let i = 0; i < labels.length; i++) {
    for (let j = i + 1; j < labels.length; j++) {
      const a = labels[i];
      const b = labels[j];
      const apart = a.right + 2 <= b.left || b.right + 2 <= a.left || a.bottom + 1 <= b.top || b.bottom + 1 <= a.top;
      assert.ok(apart, `${where}: "${a.text}" and "${b.text}" overlap: ${JSON.stringify([a, b])}`);
    }
  }
  // One unit per y axis, and labels that differ.
  assert.equal(new Set(y).size, y.length, `${where}: repeated labels ${y}`);
  const units = new Set(y.filter((v) => !/^0( |$|%)/.test(v)).map((v) => v.replace(/^-?[\d.]+/, '')));
  assert.ok(units.size <= 1, `${where}: more than one unit: ${y}`);
  if (c.name === 'net_receive_bytes_per_second') assert.ok(y.every((v) => /^\d+(\.\d+)? MiB\/s$/.test(v)), `${where}: ${y}`);
  if (c.name === 'cpu_usage_ratio') assert.ok(y.every((v) => /^\d+(\.\d+)?%$/.test(v)), `${where}: ${y}`);
  assert.ok(x.every((v) => /^\d\d:\d\d(:\d\d)?$/.test(v)), `${where}: time labels ${x}`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- the daemon's own figures beside the terminal (make run) ----------------------------

const PANEL_ARTIFACTS = ['chart-panel-320.png', 'chart-panel-768.png', 'chart-panel-1280.png', 'chart-panel-closed.png',
  'chart-panel-reopened.png', 'chart-panel-failure.png', 'chart-panel-daemon.log', 'chart-panel-e2e.log'];
const DAEMON_FIGURES = 'ahp-telemetry:/ahpd';
const SHELL = 'ahp-terminal:/shell';
// Each width with its window height and where the panel goes: beside the
// terminal when the stage (the window less the 220 px sidebar) is wide,
// under it on a narrow one.
const PANEL_WIDTHS = [[320, 640, 'bottom'], [768, 800, 'bottom'], [1280, 800, 'side']];

test('browser: ahpd --daemon-telemetry shows its charts beside the terminal without a click', {
  skip: missing ?? false,
  timeout: 90_000,
}, async (t) => {
  const { chromium } = await import('playwright-core');
  const { tmp, home } = await scratch('ahpd-e2e-panel-', PANEL_ARTIFACTS);
  const daemonOut = [];
  const log = [];
  const note = (s) => log.push(`${new Date().toISOString()} ${s}`);
  let daemon = null;
  let browser = null;
  let page = null;
  let passed = false;
  t.after(async () => {
    if (!passed && page && !page.isClosed()) {
      await page.screenshot({ path: join(ARTIFACTS_DIR, 'chart-panel-failure.png'), timeout: 3000 }).catch(() => {});
    }
    await browser?.close().catch(() => {});
    if (daemon && daemon.exitCode === null) daemon.kill('SIGKILL');
    await writeFile(join(ARTIFACTS_DIR, 'chart-panel-daemon.log'), daemonOut.join('')).catch(() => {});
    await writeFile(join(ARTIFACTS_DIR, 'chart-panel-e2e.log'), log.join('\n') + '\n').catch(() => {});
    await rm(tmp, { recursive: true, force: true });
  });

  // As make run starts it: a terminal on the login shell and the daemon's own figures.
  let link;
  ({ daemon, link } = startDaemon(home, ['--listen', '127.0.0.1:0', '--state-dir', join(tmp, 'state'), '--control', join(tmp, 'control.sock'),
    '--print-link', '--daemon-telemetry'], daemonOut));
  const url = await link;
  note(`link ${url}`);

  browser = await chromium.launch({ executablePath: CHROMIUM_BIN, args: CHROMIUM_ARGS, timeout: LAUNCH_MS });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1, timezoneId: 'UTC' });
  context.setDefaultTimeout(STEP_MS);
  page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`uncaught ${e.message}`));
  page.on('console', (m) => {
    note(`console.${m.type()}: ${m.text()}`);
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });

  // ---- the printed link, no click: the terminal and the daemon's charts ---------------

  await page.goto(url.replace('/#', '/?renderer=dom#'));
  await waitFor(page, 'the terminal, and beside it the daemon\'s charts with data', (ch) => {
    const s = window.ahpTest?.state();
    const p = s?.panel;
    return s && s.connection === 'connected' && s.ready && s.view === 'terminal' && s.channel === 'ahp-terminal:/shell' &&
      p.shown && p.channel === ch && p.telemetry?.charts.length > 0 && p.telemetry.charts.every((c) => c.drawnPoints >= 2);
  }, DAEMON_FIGURES);
  // Five seconds of figures (one a second): whole seconds on the time axis.
  await waitFor(page, 'five seconds of the daemon\'s figures', () =>
    window.ahpTest.state().panel.telemetry?.charts.every((c) => c.drawnPoints >= 5), undefined, 3 * STEP_MS);
  let st = await page.evaluate(() => window.ahpTest.state());
  note(`attached: panel ${JSON.stringify({ ...st.panel, telemetry: st.panel.telemetry.charts.map((c) => [c.name, c.drawnPoints]) })}`);
  assert.equal(st.panel.placement, 'side');
  assert.equal(st.activeElement, 'xterm-helper-textarea', 'the terminal keeps the keyboard');
  assert.equal(await page.getByTestId('chart-panel-open').textContent(), "ahpd's own figures");
  // A canvas of the panel's charts, on screen, with the daemon's count of
  // connections (this page's) in its legend.
  const canvas = await page.evaluate(() => {
    const card = document.querySelector('[data-testid=chart-panel] [data-testid=telemetry-chart][data-name=ahpd_connections]');
    const c = card?.querySelector('canvas');
    const r = c?.getBoundingClientRect();
    return c && { width: r.width, height: r.height, right: r.right, left: r.left, points: Number(card.dataset.points),
      legend: card.querySelector('[data-testid=legend-row]')?.dataset.value };
  });
  note(`ahpd_connections canvas: ${JSON.stringify(canvas)}`);
  assert.ok(canvas && canvas.width > 150 && canvas.height > 80 && canvas.right <= 1280, JSON.stringify(canvas));
  assert.ok(canvas.points >= 2 && Number(canvas.legend) >= 1, `the connections chart has data: ${JSON.stringify(canvas)}`);
  const lay = await page.evaluate(() => window.ahpTest.panel.layout());
  // The daemon's figures are seconds old: a narrow chart may have one time label.
  for (const c of lay) checkAxes(c, 'the panel at 1280', { minTime: 1 });

  // The terminal works beside it: keys reach the shell.
  await page.keyboard.type('echo beside-$((6*7))', { delay: 5 });
  await page.keyboard.press('Enter');
  await waitFor(page, 'the shell to echo', () => window.ahpTest.screenText().split('\n').includes('beside-42'));

  // ---- 320, 768, 1280 px: nothing overflows, the terminal fits what is left ------------

  for (const [width, height, placement] of PANEL_WIDTHS) {
    await page.setViewportSize({ width, height });
    await waitFor(page, `the panel ${placement} at ${width} px and the terminal fitted to the rest`, (want) => {
      const s = window.ahpTest.state();
      const f = s.terminal.fit;
      const charts = window.ahpTest.panel?.layout() ?? [];
      return s.panel.shown && s.panel.placement === want && f && f.cols === s.termCols && f.rows === s.termRows && !s.clipped &&
        charts.length > 0 && charts.every((c) => c.root.right <= c.host.right + 0.5 && Math.abs(c.canvas.cssWidth - (c.host.right - c.host.left)) < 2);
    }, placement);
    const m = await page.evaluate(() => {
      const box = (e) => {
        const r = e.getBoundingClientRect();
        return { left: r.left, right: r.right, top: r.top, bottom: r.bottom };
      };
      const s = window.ahpTest.state();
      const visible = (e) => e.getClientRects().length > 0 && !e.closest('.sidebar');
      const wide = [...document.querySelectorAll('.status, .status *, #chart-panel, #chart-panel *, #terminal, .xterm-screen')]
        .filter((e) => visible(e) && e.getBoundingClientRect().right > innerWidth + 0.5)
        .slice(0, 8).map((e) => `${e.tagName.toLowerCase()}.${e.className}#${e.id} ${Math.round(e.getBoundingClientRect().right)}`);
      const status = document.querySelector('.status');
      return {
        innerWidth, innerHeight, cols: s.termCols, rows: s.termRows, wide,
        pageWidth: document.documentElement.scrollWidth, statusOverflow: status.scrollWidth - status.clientWidth,
        theme: box(document.querySelector('[data-testid=theme-toggle]')),
        terminal: box(document.querySelector('#terminal')), screen: box(document.querySelector('#terminal .xterm-screen')),
        panel: box(document.querySelector('#chart-panel')),
      };
    });
    note(`${width} px: ${JSON.stringify(m)}`);
    assert.deepEqual(m.wide, [], `${width} px: wider than the window`);
    assert.ok(m.pageWidth <= width && m.statusOverflow <= 0, `${width} px: the page or its status line overflows: ${JSON.stringify(m)}`);
    assert.ok(m.theme.right <= width, `${width} px: the theme button ends at ${m.theme.right}`);
    assert.ok(m.cols >= 20 && m.rows >= 10, `${width} px: the terminal has ${m.cols}x${m.rows}`);
    // The terminal's text stays within its part of the stage, clear of the panel.
    assert.ok(m.screen.right <= m.terminal.right + 0.5 && m.screen.bottom <= m.terminal.bottom + 0.5, `${width} px: ${JSON.stringify(m)}`);
    if (placement === 'side') assert.ok(m.terminal.right <= m.panel.left + 0.5, `${width} px: the terminal under the panel`);
    else assert.ok(m.terminal.bottom <= m.panel.top + 0.5 && m.panel.bottom <= m.innerHeight, `${width} px: ${JSON.stringify(m)}`);
    const panelLay = await page.evaluate(() => window.ahpTest.panel.layout());
    note(`${width} px panel: ${JSON.stringify(panelLay.map((c) => ({ name: c.name, canvas: c.canvas, axes: c.axes.map((a) => a.values) })))}`);
    for (const c of panelLay) checkAxes(c, `the panel at ${width}`, { minTime: 1 });
    if (width === 320) {
      // The shell has the size the page fitted (the host applied it).
      await page.keyboard.type('stty size', { delay: 5 });
      await page.keyboard.press('Enter');
      await waitFor(page, 'stty size to print the fitted size', (want) =>
        window.ahpTest.screenText().split('\n').includes(want), `${m.rows} ${m.cols}`);
    }
    await page.screenshot({ path: join(ARTIFACTS_DIR, `chart-panel-${width}.png`) });
  }

  // ---- closed: the terminal takes the stage, and it stays closed after a reload --------------

  const colsWith = st.termCols;
  await page.getByTestId('chart-panel-close').click();
  await waitFor(page, 'the panel closed and the terminal wider', (before) => {
    const s = window.ahpTest.state();
    return !s.panel.shown && !s.panel.open && s.panel.telemetry === null && s.terminal.fit?.cols === s.termCols && s.termCols > before &&
      document.querySelector('[data-testid=chart-panel]').hidden && !document.querySelector('[data-testid=charts-toggle]').hidden;
  }, colsWith);
  assert.equal(await page.getByTestId('charts-toggle').getAttribute('aria-pressed'), 'false');
  assert.equal(await page.evaluate(() => document.activeElement?.className), 'xterm-helper-textarea');
  assert.equal(await page.evaluate(() => JSON.parse(localStorage.getItem('ahpd.prefs')).charts), 'closed');
  await page.reload();
  await waitFor(page, 'the terminal again after the reload, the daemon\'s channel listed', (ch) => {
    const s = window.ahpTest?.state();
    return s && s.connection === 'connected' && s.ready && s.view === 'terminal' && s.panel.channel === ch &&
      !document.querySelector('[data-testid=charts-toggle]').hidden;
  }, DAEMON_FIGURES);
  await sleep(500); // a few frames: the panel does not come back late
  st = await page.evaluate(() => window.ahpTest.state());
  assert.ok(!st.panel.shown && !st.panel.open, `the panel stays closed after a reload: ${JSON.stringify(st.panel)}`);
  assert.equal(st.activeElement, 'xterm-helper-textarea', 'the terminal has the keyboard after the reload');
  const colsAlone = st.termCols;
  assert.equal(await page.getByTestId('chart-panel').isVisible(), false);
  assert.equal(await page.locator('[data-testid=telemetry-chart]').count(), 0, 'no charts drawn');
  await page.screenshot({ path: join(ARTIFACTS_DIR, 'chart-panel-closed.png') });

  // ---- reopened from the status line; its title opens the charts in full --------------------

  await page.getByTestId('charts-toggle').click();
  await waitFor(page, 'the panel back with data', () => {
    const p = window.ahpTest.state().panel;
    return p.shown && p.open && p.telemetry?.charts.length > 0 && p.telemetry.charts.every((c) => c.drawnPoints >= 1);
  });
  assert.equal(await page.getByTestId('charts-toggle').getAttribute('aria-pressed'), 'true');
  await waitFor(page, 'the terminal fitted beside the panel again', (alone) => {
    const s = window.ahpTest.state();
    return s.terminal.fit?.cols === s.termCols && s.terminal.fit.rows === s.termRows && s.termCols < alone &&
      s.activeElement === 'xterm-helper-textarea';
  }, colsAlone);
  await page.screenshot({ path: join(ARTIFACTS_DIR, 'chart-panel-reopened.png') });
  await page.getByTestId('chart-panel-open').click();
  await waitFor(page, 'the daemon\'s figures in full, the panel gone', (ch) => {
    const s = window.ahpTest.state();
    return s.view === 'telemetry' && s.channel === ch && s.ready && !s.panel.shown &&
      document.querySelector('[data-testid=chart-panel]').hidden && document.querySelectorAll('[data-testid=telemetry]').length === 1;
  }, DAEMON_FIGURES);
  await page.locator(`[data-testid=channel-item][data-channel="${SHELL}"] button`).click();
  await waitFor(page, 'the terminal with its panel again', () => {
    const s = window.ahpTest.state();
    return s.view === 'terminal' && s.ready && s.panel.shown && s.panel.telemetry?.charts.length > 0;
  });

  assert.deepEqual(problems, [], 'the page logged errors');
  passed = true;
});
