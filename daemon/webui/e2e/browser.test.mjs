// browser.test.mjs — the real-browser end-to-end test: the built daemon
// (bin/ahpd, with the embedded page) and headless Debian Chromium driven by
// playwright-core. Run with `make e2e` or `npm run e2e` after `make build`.
//
// Environment:
//   AHPD_BIN       the daemon binary (default: <repo>/bin/ahpd)
//   AHPCTL_BIN     mints the view-only link (default: ahpctl beside AHPD_BIN;
//                  without it that part is skipped)
//   CHROMIUM_BIN   the browser (default: /usr/bin/chromium); never downloaded
//   ARTIFACTS_DIR  where screenshots and logs go (default: e2e/artifacts/)
//   CI=true        a missing browser or daemon fails instead of skipping
//
// Everything is on loopback, every wait is bounded, and the whole file has
// a 60 s budget.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pickRenderer } from '../src/terminal-policy.js';
import { AHPCTL_BIN, AHPD_BIN, ARTIFACTS_DIR, CHROMIUM_ARGS, CHROMIUM_BIN, CI, printedLink, run, STEP_MS, waitAttached, waitFor, within } from './common.mjs';


const ARTIFACTS = ['terminal.png', 'view-only.png', 'terminal-after-reload.png', 'long-snapshot.png', 'after-shutdown.png',
  'ticket-reused.png', 'exited.png', 'new-terminal.png', 'clipped.png', 'phone.png', 'phone-sidebar.png', 'after-upgrade.png', 'after-restart.png',
  'failure-page5.png', 'failure-page1.png', 'failure-page2.png', 'failure-page3.png', 'failure-page4.png',
  'daemon.log', 'e2e.log'];
const CHANNEL = 'ahp-terminal:/shell';
const PROMPT = 'e2e$ ';
const LAUNCH_MS = 30_000; // starting Chromium (seconds on a loaded 2-core machine)

const missing = !existsSync(CHROMIUM_BIN) ? `no browser at ${CHROMIUM_BIN} (apt-get install chromium)`
  : !existsSync(AHPD_BIN) ? `no daemon at ${AHPD_BIN} (make build)` : null;
if (missing && CI) throw new Error(`e2e: ${missing}`);

test('browser: type `echo hello` into the page and see the output', { skip: missing ?? false, timeout: 60_000 }, async (t) => {
  const { chromium } = await import('playwright-core');
  await mkdir(ARTIFACTS_DIR, { recursive: true });
  for (const f of ARTIFACTS) await rm(join(ARTIFACTS_DIR, f), { force: true });
  const tmp = await mkdtemp(join(tmpdir(), 'ahpd-e2e-'));
  const home = join(tmp, 'home');
  const stateDir = join(tmp, 'state');
  await mkdir(home, { recursive: true });
  // A login /bin/sh reads /etc/profile (which sets PS1 to '# ' for root),
  // then $HOME/.profile (absent: HOME is empty), then $ENV for an
  // interactive shell: the prompt is set there.
  const shrc = join(home, 'shrc');
  await writeFile(shrc, `PS1='${PROMPT}'\n`);

  const log = [];
  const note = (line) => log.push(`${new Date().toISOString()} ${line}`);
  let daemon = null;
  let browser = null;
  const daemonOut = [];
  let daemonExit = null;
  const pages = new Map(); // name → page, for a screenshot when the test fails
  let passed = false;

  let daemon2 = null; // the daemon started again on the same port and state dir
  t.after(async () => {
    if (daemon2 && daemon2.exitCode === null) daemon2.kill('SIGKILL');
    if (!passed) {
      for (const [name, p] of pages) {
        if (!p.isClosed()) await p.screenshot({ path: join(ARTIFACTS_DIR, `failure-${name}.png`), timeout: 3000 }).catch(() => {});
      }
    }
    await browser?.close().catch(() => {});
    if (daemon && !daemonExit) daemon.kill('SIGKILL');
    await writeFile(join(ARTIFACTS_DIR, 'daemon.log'), daemonOut.join('')).catch(() => {});
    await writeFile(join(ARTIFACTS_DIR, 'e2e.log'), log.join('\n') + '\n').catch(() => {});
    await rm(tmp, { recursive: true, force: true });
  });

  // ---- the daemon -----------------------------------------------------------

  const controlSock = join(tmp, 'control.sock');
  // --print-link: stderr is a pipe here, where ahpd would only log how to get a link.
  const startDaemon = (listen) => spawn(AHPD_BIN, ['--listen', listen, '--state-dir', stateDir, '--control', controlSock, '--print-link'], {
    cwd: home,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: '/usr/local/bin:/usr/bin:/bin',
      HOME: home,
      SHELL: '/bin/sh',
      ENV: shrc,
      PS1: PROMPT,
      LANG: 'C.UTF-8',
      TZ: 'UTC',
    },
  });
  daemon = startDaemon('127.0.0.1:0');
  const exited = new Promise((res) => daemon.on('exit', (code, signal) => {
    daemonExit = { code, signal };
    note(`daemon exited code=${code} signal=${signal}`);
    res(daemonExit);
  }));
  daemon.stdout.setEncoding('utf8').on('data', (s) => daemonOut.push(s));
  const url = await printedLink(daemon, daemonOut, exited);
  const base = new URL(url).origin;
  note(`daemon at ${base}`);
  // The daemon percent-encodes the channel (ahp-terminal%3A%2Fshell).
  assert.equal(decodeURIComponent(/&channel=(\S+)$/.exec(url)[1]), CHANNEL);

  // ---- the browser ----------------------------------------------------------

  note('step: starting Chromium');
  browser = await chromium.launch({ executablePath: CHROMIUM_BIN, args: CHROMIUM_ARGS, timeout: LAUNCH_MS });
  const context = await browser.newContext({ viewport: { width: 1100, height: 640 }, deviceScaleFactor: 1 });
  context.setDefaultTimeout(STEP_MS);
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
  const problems = [];
  let shuttingDown = false; // after SIGTERM the page's reconnects are refused
  const watch = (page, name) => {
    pages.set(name, page);
    page.on('pageerror', (e) => problems.push(`${name}: uncaught ${e.message}`));
    page.on('console', (m) => {
      note(`${name} console.${m.type()}: ${m.text()}`);
      if (m.type() !== 'error') return;
      if (shuttingDown && /ERR_CONNECTION_REFUSED/.test(m.text())) return;
      problems.push(`${name}: console error: ${m.text()}`);
    });
    page.on('requestfailed', (r) => note(`${name} request failed: ${r.url()} ${r.failure()?.errorText}`));
  };

  note('step: opening the ticket URL');
  const page = await context.newPage();
  watch(page, 'page1');
  // ?renderer=webgl: this page tests the WebGL renderer, which the page
  // would not pick by itself here (headless Chromium draws WebGL with
  // SwiftShader, a software rasterizer; page4 checks that choice).
  await page.goto(url.replace('/#', '/?renderer=webgl#'));
  note('page loaded');
  // Issue 16: the terminal has the keyboard from the start; keys typed
  // before the page is attached (no click) reach the shell once it is.
  await typeLine(page, 'echo typed-$((40+2))-at-load');
  await waitAttached(page);
  note('attached');
  assert.equal(await focused(page), 'xterm-helper-textarea', 'the terminal has the focus after load');
  await waitScreen(page, 'the keys typed at load to reach the shell', (lines) => lines.includes('typed-42-at-load'));

  // The ticket is taken out of the address bar; the channel stays.
  assert.ok(!page.url().includes('ticket='), `ticket left in the URL: ${page.url()}`);
  assert.ok(page.url().endsWith(`#channel=${CHANNEL}`), page.url());
  assert.equal(await text(page, 'status-connection'), 'connected');
  assert.equal(await text(page, 'status-channel'), CHANNEL);
  assert.equal(await text(page, 'status-role'), 'role control');
  assert.equal(await page.getByTestId('view-only').isVisible(), false);
  assert.equal(await page.getByTestId('channel-item').count(), 1);
  assert.equal(await page.getByTestId('channel-item').getAttribute('data-channel'), CHANNEL);
  await waitFor(page, 'the channel list to count this viewer',
    () => document.querySelector('[data-testid=channel-item] .meta')?.textContent === 'terminal · running · 1 viewer');
  // The list's buttons fit the sidebar: no horizontal scrollbar (a
  // content-box button of width 100% overflowed it by its padding).
  const sidebar = await page.evaluate(() => {
    const s = document.querySelector('.sidebar');
    return { scrollWidth: s.scrollWidth, clientWidth: s.clientWidth };
  });
  assert.ok(sidebar.scrollWidth <= sidebar.clientWidth, `the sidebar overflows sideways: ${JSON.stringify(sidebar)}`);

  // The page asks for its own size once attached; the host's answer resizes
  // xterm, and the terminal then fills the stage.
  await waitFor(page, 'the terminal to take the size of the window', () => {
    const s = window.ahpTest.state();
    return s.rows === s.termRows && s.cols === s.termCols && !(s.rows === 24 && s.cols === 80);
  });
  const fill = await page.evaluate(() => {
    const box = document.querySelector('[data-testid=terminal]').getBoundingClientRect();
    const screen = document.querySelector('.xterm-screen').getBoundingClientRect();
    const s = window.ahpTest.state();
    return { box, screen, rows: s.rows, cols: s.cols };
  });
  note(`terminal ${fill.rows}x${fill.cols}; container ${JSON.stringify(fill.box)}; screen ${JSON.stringify(fill.screen)}`);
  const cellH = fill.screen.height / fill.rows;
  const cellW = fill.screen.width / fill.cols;
  assert.ok(fill.box.height - fill.screen.height < 2 * cellH + 8, `terminal does not fill the height: ${JSON.stringify(fill)}`);
  assert.ok(fill.box.width - fill.screen.width < 2 * cellW + 24, `terminal does not fill the width: ${JSON.stringify(fill)}`);
  assert.equal(await text(page, 'status-size'), `${fill.cols}x${fill.rows}`, 'columns x rows, as ahpctl writes sizes');

  // ---- type a command -------------------------------------------------------

  note('step: typing echo hello');
  await waitScreen(page, 'the prompt', (lines, prompt) => lines.some((l) => l.startsWith(prompt.trimEnd())), PROMPT);
  await page.getByTestId('terminal').click();
  await typeLine(page, 'echo hello');
  await waitScreen(page, 'the output `hello`', (lines) => {
    const i = lines.findIndex((l) => /echo hello$/.test(l));
    return i >= 0 && lines.slice(i + 1).some((l) => l === 'hello');
  });
  // A real shell: arithmetic is evaluated, the PTY has the page's size,
  // and non-ASCII input and output (a wide CJK pair) survive both ways.
  await typeLine(page, 'echo e2e-$((6*7)); stty size; echo héllo-日本');
  await waitScreen(page, 'the shell to evaluate, report the size and echo UTF-8',
    (lines, size) => lines.includes('e2e-42') && lines.includes(size) && lines.includes('héllo-日本'),
    `${fill.rows} ${fill.cols}`);
  await waitFor(page, 'the latency measure', () => window.ahpTest.state().latencyMs != null);
  await page.screenshot({ path: join(ARTIFACTS_DIR, 'terminal.png') });
  note(`screen after echo:\n${await screenText(page)}`);

  // ---- the program's title (OSC 0) --------------------------------------

  note('step: title');
  await typeLine(page, "printf '\\033]0;e2e title\\007'");
  await waitFor(page, 'the tab title and the list to show the OSC 0 title', () =>
    document.title === 'e2e title — ahpd' &&
    document.querySelector('[data-testid=channel-item] .title')?.textContent === 'e2e title');

  // ---- links, copy on select, the renderer ----------------------------------

  note('step: link, copy');
  await typeLine(page, 'echo https://example.com/e2e-link');
  const linkAt = await cellOf(page, (l) => l === 'https://example.com/e2e-link', 4);
  await page.mouse.move(linkAt.x, linkAt.y);
  await waitFor(page, 'the link to be recognised under the mouse',
    () => document.querySelector('[data-testid=terminal]').dataset.hoverLink === 'https://example.com/e2e-link');
  const wordAt = await cellOf(page, (l) => l === 'hello', 1);
  await page.mouse.dblclick(wordAt.x, wordAt.y);
  await waitFor(page, 'the copied toast', () => {
    const t = document.querySelector('[data-testid=toast]');
    return !t.hidden && t.textContent === 'copied 5 characters';
  });
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'hello');
  await page.evaluate(() => window.ahpTest.term.selectAll());
  await page.keyboard.press('Control+Shift+C');
  assert.match(await page.evaluate(() => navigator.clipboard.readText()), /typed-42-at-load[^]*e2e-link/);
  await page.evaluate(() => window.ahpTest.term.clearSelection());
  assert.equal(await focused(page), 'xterm-helper-textarea', 'the terminal keeps the focus after a copy');
  const webgl = await page.evaluate(() => !!document.createElement('canvas').getContext('webgl2'));
  const renderer = await page.evaluate(() => window.ahpTest.state().terminal.renderer);
  note(`webgl2 available: ${webgl}; renderer ${renderer}`);
  assert.equal(renderer, webgl ? 'webgl' : 'dom');
  if (webgl) {
    // A lost WebGL context falls back to the DOM renderer, and typing works on.
    assert.ok(await page.evaluate(() => window.ahpTest.view.loseWebglContext()));
    await waitFor(page, 'the DOM renderer after a lost context', () => window.ahpTest.state().terminal.renderer === 'dom');
    await typeLine(page, 'echo after-context-loss');
    await waitScreen(page, 'output drawn by the DOM renderer', (lines) => lines.includes('after-context-loss'));
    // The buffer has it at once; the DOM renderer draws it on its next frame.
    await waitFor(page, 'the DOM renderer to draw the output', () =>
      !!document.querySelector('.xterm-rows')?.textContent.includes('after-context-loss'));
  }

  // ---- a second viewer ------------------------------------------------------
  // Tickets are minted by the daemon only (one is printed); the second tab
  // uses the admin token from the state directory as its #token=.

  note('step: second viewer');
  const admin = (await readFile(join(stateDir, 'admin.token'), 'utf8')).trim();
  const page2 = await context.newPage();
  watch(page2, 'page2');
  // A smaller window than page1's. The most recently active control
  // viewer's size decides (docs/protocol-decisions.md): page2 opening does
  // not shrink the terminal, it is clipped until it is used.
  await page2.setViewportSize({ width: 760, height: 420 });
  const before = await page.evaluate(() => window.ahpTest.state());
  await page2.goto(`${base}/?renderer=dom#token=${encodeURIComponent(admin)}&channel=${CHANNEL}`);
  await waitAttached(page2);
  await waitScreen(page2, 'the snapshot with `hello`', (lines) => lines.includes('hello'));
  await waitFor(page2, 'the channel list to count two viewers',
    () => document.querySelector(`[data-testid=channel-item][data-channel="ahp-terminal:/shell"] .meta`)?.textContent === 'terminal · running · 2 viewers');
  const fit2 = await page2.evaluate(() => window.ahpTest.state().terminal.fit);
  await waitFor(page2, 'page2 to report its size', () => window.ahpTest.state().terminal.requests === 1);
  await waitFor(page2, 'the clipped badge in page2', () => !document.querySelector('[data-testid=clipped]').hidden);
  assert.match(await text(page2, 'clipped'), new RegExp(`^clipped ${before.cols}x${before.rows} > ${fit2.cols}x${fit2.rows}$`));
  await page.waitForTimeout(600);
  let s1 = await page.evaluate(() => window.ahpTest.state());
  assert.deepEqual([s1.rows, s1.cols], [before.rows, before.cols], 'a second, smaller tab shrank the terminal by opening');
  // Typing in page2 makes its size apply, before its keys reach the shell.
  await typeLine(page2, 'echo second-viewer; stty size');
  for (const p of [page2, page]) {
    await waitScreen(p, 'output typed in the second tab', (lines, size) => lines.includes('second-viewer') && lines.includes(size),
      `${fit2.rows} ${fit2.cols}`);
  }
  await waitFor(page2, 'page2 to be unclipped', () => document.querySelector('[data-testid=clipped]').hidden);
  // page1 did not change its window, so it does not ask for its size back.
  await page.waitForTimeout(600);
  s1 = await page.evaluate(() => window.ahpTest.state());
  assert.deepEqual([s1.rows, s1.cols, s1.terminal.requests], [fit2.rows, fit2.cols, before.terminal.requests], 'page1 snapped the size back');
  assert.equal(s1.clipped, null);
  // page1's window grows: an explicit resize, so its size applies, and page2 shows it is clipped.
  // (Its size settles: a fit measured at page2's size can be a column short
  // at its own, terminal-policy.js, so it may ask once more.)
  await page.setViewportSize({ width: 1140, height: 660 });
  await waitFor(page, 'page1 at the size that fits its window', () => {
    const s = window.ahpTest.state();
    return s.rows === s.terminal.fit.rows && s.cols === s.terminal.fit.cols && s.cols > 100;
  });
  s1 = await page.evaluate(() => window.ahpTest.state());
  await waitFor(page2, 'the clipped badge in page2 with page1\'s size', (want) =>
    document.querySelector('[data-testid=clipped]').textContent === want, `clipped ${s1.cols}x${s1.rows} > ${fit2.cols}x${fit2.rows}`);
  await page2.screenshot({ path: join(ARTIFACTS_DIR, 'clipped.png') });
  // The badge asks for page2's size.
  await page2.getByTestId('clipped').click();
  await waitFor(page2, 'page2 to be unclipped', () => document.querySelector('[data-testid=clipped]').hidden);
  await waitFor(page, 'page1 to follow', (f) => window.ahpTest.state().cols === f.cols, fit2);
  const fit1 = s1.terminal.fit;

  // ---- switching channels keeps the keyboard on the terminal ----------------

  if (existsSync(AHPCTL_BIN)) {
    note('step: switching channels');
    const second = (await run(AHPCTL_BIN, ['terminal', 'create', '--id', 'second', '--title', 'the second', '--', '/bin/sh'],
      { AHP_CONTROL: controlSock })).trim();
    assert.equal(second, 'ahp-terminal:/second');
    const item = (p, ch) => p.locator(`[data-testid=channel-item][data-channel="${ch}"] button`);
    // channels/changed, not the 5 s poll: it is listed at once.
    await waitFor(page2, 'the second terminal in the list within 1.5 s',
      () => !!document.querySelector('[data-testid=channel-item][data-channel="ahp-terminal:/second"]'), undefined, 1500);
    await item(page2, second).click();
    await waitAttached(page2);
    // page2, whose size applied, left the shell: page1's applies again.
    await waitFor(page, 'the shell to take page1\'s size again once page2 left it',
      (f) => { const s = window.ahpTest.state(); return s.rows === f.rows && s.cols === f.cols; }, fit1);
    assert.equal(await focused(page2), 'xterm-helper-textarea', 'the focus stayed on the list');
    await typeLine(page2, 'echo in-second');
    await waitScreen(page2, 'output in the second terminal', (lines) => lines.includes('in-second'));
    assert.equal(await page2.title(), 'the second — ahpd');
    await item(page2, CHANNEL).click();
    await waitAttached(page2);
    await typeLine(page2, 'echo back-in-shell');
    await waitScreen(page2, 'output after switching back', (lines) => lines.includes('back-in-shell') && lines.includes('second-viewer'));
    assert.equal(await page2.title(), 'e2e title — ahpd');

    // ---- the program exits: the notice stays, the list says so at once ----

    note('step: exit');
    await item(page2, second).click();
    await waitAttached(page2);
    await typeLine(page2, 'exit 3');
    await waitFor(page2, 'the exit notice', () => /exited with code 3/.test(document.querySelector('[data-testid=exit-notice]')?.textContent ?? ''));
    await waitFor(page2, 'the list to show the exit before its next poll', () =>
      /· (exited|closed) ·/.test(document.querySelector('[data-testid=channel-item][data-channel="ahp-terminal:/second"] .meta')?.textContent),
    undefined, 1500);
    await page2.keyboard.type('x');
    await page2.waitForTimeout(400);
    const n = await page2.evaluate(() => {
      const e = document.querySelector('#notice');
      return { testid: e.dataset.testid, error: e.classList.contains('error'), text: e.textContent };
    });
    assert.equal(n.testid, 'exit-notice', `a key after the exit replaced the notice: ${JSON.stringify(n)}`);
    assert.equal(n.error, false);
    await page2.screenshot({ path: join(ARTIFACTS_DIR, 'exited.png') });

    // ---- Restart reruns it under the same URI; Close removes it ------------

    note('step: restart, close, new terminal');
    const oldSub = await page2.evaluate(() => window.ahpTest.state().subscriptionId);
    await page2.getByTestId('restart').click();
    await waitFor(page2, 'the page to attach to the restarted channel', (old) => {
      const s = window.ahpTest?.state();
      return s && s.connection === 'connected' && s.ready && s.subscriptionId != null && s.subscriptionId !== old;
    }, oldSub);
    // A shell that is just starting may discard what was typed before it
    // was ready (its terminal set-up flushes input): wait for its prompt —
    // the new shell's, not the old screen's (whose last lines are prompts
    // too, until the new channel's snapshot replaces them; typing then
    // lost the first keys: "/bin/sh: started-run: not found").
    await waitScreen(page2, 'the restarted shell\'s prompt', (lines) =>
      lines.some((l) => l.startsWith(PROMPT)) && !lines.some((l) => l.includes('exit 3')));
    await typeLine(page2, 'echo restarted-run');
    await waitScreen(page2, 'output after the restart', (lines) => lines.includes('restarted-run'));
    await typeLine(page2, 'exit 4');
    await waitFor(page2, 'the second exit', () => /exited with code 4/.test(document.querySelector('[data-testid=exit-notice]')?.textContent ?? ''));
    await page2.getByTestId('close').click();
    await waitFor(page2, 'the closed channel to leave the list',
      () => !document.querySelector('[data-testid=channel-item][data-channel="ahp-terminal:/second"]'));
    const before = await page2.evaluate(() => [...document.querySelectorAll('[data-testid=channel-item]')].map((e) => e.dataset.channel));
    await page2.getByTestId('new-terminal').click();
    await waitFor(page2, 'a new terminal in the list', (n) => document.querySelectorAll('[data-testid=channel-item]').length === n + 1, before.length);
    await waitAttached(page2);
    await waitScreen(page2, 'the new shell\'s prompt', (lines) => lines.some((l) => l.startsWith(PROMPT)));
    await typeLine(page2, 'echo in-new-terminal');
    await waitScreen(page2, 'output in the new terminal', (lines) => lines.includes('in-new-terminal'));
    await page2.screenshot({ path: join(ARTIFACTS_DIR, 'new-terminal.png') });
    // The status line's close asks again, then closes the running terminal.
    const created = await page2.evaluate(() => window.ahpTest.state().channel);
    await page2.getByTestId('close-channel').click();
    assert.match(await page2.getByTestId('close-channel').textContent(), /click again/);
    await page2.getByTestId('close-channel').click();
    await waitFor(page2, 'the closed terminal to leave the list',
      (ch) => !document.querySelector(`[data-testid=channel-item][data-channel="${ch}"]`), created);
  }
  await page2.close();

  // ---- a phone-sized window -------------------------------------------------

  note('step: phone');
  const page5 = await context.newPage();
  watch(page5, 'page5');
  await page5.setViewportSize({ width: 390, height: 740 });
  await page5.goto(`${base}/?renderer=dom#token=${encodeURIComponent(admin)}&channel=${CHANNEL}`);
  await waitAttached(page5);
  const phone = await page5.evaluate(() => ({
    host: document.querySelector('[data-testid=terminal]').getBoundingClientRect().width,
    sidebar: getComputedStyle(document.querySelector('.sidebar')).visibility,
    fit: window.ahpTest.state().terminal.fit,
    cell: document.querySelector('.xterm-screen').getBoundingClientRect().width / window.ahpTest.term.cols,
  }));
  note(`phone: ${JSON.stringify(phone)}`);
  assert.equal(phone.sidebar, 'hidden');
  assert.ok(phone.host >= 380, `the terminal gets ${phone.host}px of 390`);
  assert.ok(phone.fit.cols * phone.cell >= 0.9 * 390, `only ${phone.fit.cols} columns fit`);
  await page5.screenshot({ path: join(ARTIFACTS_DIR, 'phone.png') });
  await page5.getByTestId('sidebar-toggle').click();
  await waitFor(page5, 'the sidebar drawer', () => getComputedStyle(document.querySelector('.sidebar')).visibility === 'visible');
  await page5.waitForTimeout(200); // the slide-in
  await page5.screenshot({ path: join(ARTIFACTS_DIR, 'phone-sidebar.png') });
  await page5.locator(`[data-testid=channel-item][data-channel="${CHANNEL}"] button`).click();
  await waitFor(page5, 'the drawer to close on a pick', () => getComputedStyle(document.querySelector('.sidebar')).visibility === 'hidden');
  await page5.close();

  // ---- a view-only viewer ---------------------------------------------------
  // `ahpctl open --role view URI` mints a view-only ticket link.

  if (!existsSync(AHPCTL_BIN)) {
    t.diagnostic(`view-only check skipped: no ${AHPCTL_BIN}`);
  } else {
    note('step: view-only viewer');
    const viewUrl = (await run(AHPCTL_BIN, ['open', '--role', 'view', CHANNEL], { AHP_CONTROL: controlSock })).trim();
    note(`view-only link: ${viewUrl.replace(/ticket=[^&]+/, 'ticket=…')}`);
    assert.match(viewUrl, /^http:\/\/127\.0\.0\.1:\d+\/#ticket=/);
    const page3 = await context.newPage();
    watch(page3, 'page3');
    await page3.goto(viewUrl.replace('/#', '/?renderer=dom#'));
    await waitAttached(page3);
    assert.equal(await text(page3, 'status-role'), 'role view');
    assert.equal(await page3.getByTestId('view-only').isVisible(), true);
    await waitScreen(page3, 'the snapshot in the view-only tab', (lines) => lines.includes('hello'));
    // Keys typed in the view-only tab go nowhere, and it says so ...
    await page3.getByTestId('terminal').click();
    await typeLine(page3, 'echo from-viewer');
    await waitFor(page3, 'the view-only hint', () => {
      const t = document.querySelector('[data-testid=toast]');
      return !t.hidden && t.dataset.kind === 'view-only-hint' && t.textContent === 'view only: typing is disabled';
    });
    // ... while output typed in the control tab reaches it. The shell handles
    // input in order, so once the marker is out, the viewer's line would be too.
    await page.getByTestId('terminal').click();
    await typeLine(page, 'echo marker-after-viewer');
    for (const p of [page, page3]) {
      const lines = await waitScreen(p, 'the marker', (l) => l.includes('marker-after-viewer'));
      assert.ok(!lines.some((l) => l.includes('from-viewer')), `view-only input reached the shell:\n${lines.join('\n')}`);
    }
    const sent = await page3.evaluate(() => window.ahpTest.state().send);
    assert.equal(sent?.sentBytes, 0, `the view-only tab sent input: ${JSON.stringify(sent)}`);
    await page3.screenshot({ path: join(ARTIFACTS_DIR, 'view-only.png') });
    await page3.close();
  }

  // ---- the printed ticket works once ----------------------------------------

  note('step: reusing the ticket');
  const page4 = await context.newPage();
  watch(page4, 'page4');
  await page4.goto(url);
  await waitFor(page4, 'the page to report the used ticket', () => window.ahpTest.state().error === 'unauthorized');
  // Without ?renderer= the page draws with WebGL on a GPU only, not on a
  // software rasterizer (SwiftShader here), where the DOM renderer is
  // faster, nor without a WebGL 2 context (webglName null): the renderer
  // pickRenderer chooses for what the browser offers, checked whatever
  // that is.
  const auto = await page4.evaluate(() => window.ahpTest.state().terminal);
  note(`page4: WebGL ${JSON.stringify(auto.webglName)}, renderer ${auto.renderer}`);
  assert.equal(auto.renderer, pickRenderer('', auto.webglName === null ? null : { name: auto.webglName }),
    `page4: the automatic renderer for WebGL ${JSON.stringify(auto.webglName)}`);
  assert.equal(await page4.getByTestId('auth-help').isVisible(), true);
  assert.match(await page4.getByTestId('auth-help').textContent(), /already used or has expired.*ahpctl open ahp-terminal:\/shell and open the URL/);
  assert.equal(await page4.evaluate(() => window.ahpTest.state().subscriptionId), null);
  await page4.screenshot({ path: join(ARTIFACTS_DIR, 'ticket-reused.png') });
  await page4.close();

  // ---- reload: reconnect token and snapshot ---------------------------------

  note('step: font size and theme');
  await page.getByTestId('terminal').click();
  await page.keyboard.press('Control+Equal');
  await waitFor(page, 'font size 14', () => window.ahpTest.state().terminal.fontSize === 14);
  await page.getByTestId('theme-toggle').click();
  assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'light');

  note('step: reloading');
  await page.reload();
  await waitAttached(page);
  assert.deepEqual(await page.evaluate(() => [window.ahpTest.state().terminal.fontSize, document.documentElement.dataset.theme]),
    [14, 'light'], 'font size and theme are kept');
  assert.equal(await focused(page), 'xterm-helper-textarea');
  assert.equal(await text(page, 'status-role'), 'role control');
  await waitScreen(page, '`hello` after the reload', (lines) => lines.includes('hello') && lines.includes('second-viewer'));
  await page.getByTestId('terminal').click();
  await typeLine(page, 'echo after-reload');
  await waitScreen(page, 'output typed after the reload', (lines) => lines.includes('after-reload'));
  await page.screenshot({ path: join(ARTIFACTS_DIR, 'terminal-after-reload.png') });
  await page.keyboard.press('Control+0');
  await page.getByTestId('theme-toggle').click();
  await waitFor(page, 'font size 13', () => window.ahpTest.state().terminal.fontSize === 13);

  // ---- a long snapshot: its preview first, its scrollback behind it ----------

  // A reload after 30,000 lines gets a snapshot of 10,000 lines of
  // scrollback, whose terminal/reset carries a preview of the screen. Every
  // frame xterm draws from the first that shows the end of the output must
  // show it (the scrollback goes in with rendering held), and the page ends
  // on the normal screen, rendering resumed, with the scrollback in order.
  note('step: a long snapshot with a preview');
  await typeLine(page, 'seq 1 30000; echo seq-done');
  await waitScreen(page, 'the end of seq', (lines) => lines.includes('seq-done'));
  await page.addInitScript(() => {
    let hooks;
    Object.defineProperty(window, 'ahpTest', {
      configurable: true,
      get: () => hooks,
      set: (v) => {
        hooks = v;
        const term = v.term;
        window.__frames = [];
        term.onRender(() => {
          const b = term.buffer.active;
          let end = false;
          for (let y = 0; y < term.rows; y++) end ||= b.getLine(b.viewportY + y)?.translateToString(true) === 'seq-done';
          window.__frames.push({ type: b.type, end });
        });
      },
    });
  });
  await page.reload();
  await waitAttached(page);
  await waitScreen(page, 'the end of seq after the reload', (lines) => lines.includes('seq-done'));
  const applied = await page.evaluate(() => {
    const term = window.ahpTest.term;
    const b = term.buffer.active;
    const numbers = [];
    for (let y = 0; y < b.length; y++) {
      const l = b.getLine(y).translateToString(true);
      if (/^\d+$/.test(l)) numbers.push(Number(l));
    }
    return {
      previews: window.ahpTest.state().terminal.stream.previews,
      type: b.type,
      held: term.modes.synchronizedOutputMode,
      length: b.length,
      rows: term.rows,
      first: numbers[0],
      last: numbers.at(-1),
      inOrder: numbers.every((n, i) => i === 0 || n === numbers[i - 1] + 1),
      frames: window.__frames,
    };
  });
  assert.equal(applied.previews, 1, 'the reload\'s snapshot came with a preview');
  assert.equal(applied.type, 'normal', 'the page ends on the normal screen');
  assert.equal(applied.held, false, 'rendering resumed after the snapshot');
  assert.equal(applied.length, 10000 + applied.rows, 'a full scrollback');
  assert.ok(applied.inOrder && applied.last === 30000 && applied.first < 30000 - 9000,
    `the scrollback in order: ${applied.first}..${applied.last}, in order ${applied.inOrder}`);
  const shown = applied.frames.findIndex((f) => f.end);
  assert.ok(shown >= 0 && applied.frames[shown].type === 'alternate', `the first frame with the end is the preview's: ${JSON.stringify(applied.frames)}`);
  assert.ok(applied.frames.slice(shown).every((f) => f.end), `a frame after the preview without the end: ${JSON.stringify(applied.frames)}`);
  note(`long snapshot: ${applied.frames.length} frames, the preview at frame ${shown}, scrollback ${applied.first}..${applied.last}`);
  await page.screenshot({ path: join(ARTIFACTS_DIR, 'long-snapshot.png') });

  // ---- upgrade in place: the tab reconnects to the same shell -------------
  // SIGUSR2 re-executes the daemon (docs/upgrade.md): the page is closed
  // with 1012, reconnects with its token, and finds the same terminal —
  // no restart notice, the screen and a background job kept.

  note('step: upgrade in place (SIGUSR2)');
  await typeLine(page, 'sleep 1000 & echo job-$!');
  const job = (await waitScreen(page, 'the background job', (lines) => lines.some((l) => /^job-\d+$/.test(l))))
    .find((l) => /^job-\d+$/.test(l));
  // The page is down for a backoff step only: record every close it shows.
  await page.evaluate(() => {
    window.e2eCloses = [];
    window.e2eBanners = [];
    window.e2eWatch = setInterval(() => {
      const c = window.ahpTest.state().closeCode;
      if (c != null && window.e2eCloses.at(-1) !== c) window.e2eCloses.push(c);
      const b = document.querySelector('[data-testid=disconnected]');
      if (!b.hidden && window.e2eBanners.at(-1) !== b.textContent) window.e2eBanners.push(b.textContent);
    }, 5);
  });
  const screenBefore = await screenText(page);
  daemon.kill('SIGUSR2');
  await waitFor(page, 'the page to see close 1012', () => window.e2eCloses.includes(1012));
  await waitAttached(page);
  // The snapshot after the reconnect shows the screen as it was.
  await waitScreen(page, 'the same screen after the upgrade', (lines) => lines.join('\n') === screenBefore);
  const seen = await page.evaluate(() => { clearInterval(window.e2eWatch); return { closes: window.e2eCloses, banners: window.e2eBanners }; });
  assert.deepEqual(seen.closes, [1012]);
  // While down, the page says it is an upgrade, not an error.
  assert.ok(seen.banners.length > 0 && seen.banners.every((b) => b.startsWith('Upgrading — ahpd is restarting itself in place')), JSON.stringify(seen.banners));
  assert.equal(await page.$('[data-testid=restart-notice]'), null, 'an upgrade is not a restart');
  await typeLine(page, `kill -0 ${job.slice('job-'.length)} && echo same-job-$((6*7))`);
  await waitScreen(page, 'the job kept across the upgrade', (lines) => lines.includes('same-job-42'));
  await page.screenshot({ path: join(ARTIFACTS_DIR, 'after-upgrade.png') });

  // ---- shutdown -------------------------------------------------------------

  note('step: SIGTERM');
  assert.deepEqual(problems, [], 'the page logged errors');
  shuttingDown = true;
  daemon.kill('SIGTERM');
  const exit = await within(STEP_MS, 'the daemon to exit after SIGTERM', exited);
  assert.deepEqual(exit, { code: 0, signal: null }, 'SIGTERM must exit 0');
  // Every connection was closed with 1001 (going away): the page says so,
  // dims the stale screen, and keeps saying 1001 while its reconnects fail.
  await waitFor(page, 'the page to see close 1001', () => window.ahpTest.state().closeCode === 1001);
  await waitFor(page, 'a failed reconnect', () => window.ahpTest.state().attempt >= 2);
  const down = await page.evaluate(() => ({
    s: window.ahpTest.state(),
    banner: document.querySelector('[data-testid=disconnected]').textContent,
    visible: !document.querySelector('[data-testid=disconnected]').hidden,
    dim: getComputedStyle(document.querySelector('[data-testid=terminal]')).opacity,
  }));
  assert.equal(down.s.closeCode, 1001, JSON.stringify(down.s));
  assert.ok(down.visible);
  assert.match(down.banner, /^Disconnected — closed 1001 “host shutting down”\. Reconnecting/);
  assert.ok(Number(down.dim) < 0.6, `the stale screen is not dimmed: opacity ${down.dim}`);
  assert.match(await text(page, 'status-connection'), /closed 1001: host shutting down/);
  await page.keyboard.type('x'); // keys typed while down are not sent, and the page says so
  await waitFor(page, 'the not-sent hint', () => document.querySelector('[data-testid=toast]').dataset.kind === 'not-sent');
  await page.screenshot({ path: join(ARTIFACTS_DIR, 'after-shutdown.png') });

  // ---- restart: the tab reconnects by itself and says the shell is new ------
  // Tokens are kept in the state directory (daemon/auth/persist.go): the
  // daemon started again on it takes the tab's reconnect token; its
  // server.started differs, so the page says the old terminal ended with
  // the old daemon and shows the new one.

  note('step: restart');
  daemon2 = startDaemon(new URL(base).host);
  daemon2.stdout.setEncoding('utf8').on('data', (s) => daemonOut.push(s));
  daemon2.stderr.setEncoding('utf8').on('data', (s) => daemonOut.push(s));
  await waitFor(page, 'the page to reconnect to the restarted daemon', () => {
    const s = window.ahpTest.state();
    return s.connection === 'connected' && s.ready;
  });
  await waitFor(page, 'the restart notice', () => document.querySelector('[data-testid=restart-notice]') != null);
  const notice = await page.getByTestId('restart-notice').textContent();
  assert.match(notice, /^ahpd restarted: the terminal this tab showed ended with the old daemon; ahp-terminal:\/shell is a new channel/);
  await typeLine(page, 'echo after-restart');
  await waitScreen(page, 'output in the new shell', (lines) => lines.includes('after-restart'));
  await page.screenshot({ path: join(ARTIFACTS_DIR, 'after-restart.png') });
  daemon2.kill('SIGTERM');

  assert.deepEqual(problems, [], 'the page logged errors');
  passed = true;
});

// ---- helpers ----------------------------------------------------------------

// waitScreen waits until pred(lines of the visible screen, arg) holds.
async function waitScreen(page, what, pred, arg) {
  const deadline = Date.now() + STEP_MS;
  for (;;) {
    const lines = (await screenText(page)).split('\n');
    if (pred(lines, arg)) return lines;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; screen:\n${lines.join('\n')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}


// typeLine types text and Enter as key presses into the focused terminal.
async function typeLine(page, text) {
  await page.keyboard.type(text, { delay: 5 });
  await page.keyboard.press('Enter');
}

// focused returns the class (or tag) of the page's focused element.
function focused(page) {
  return page.evaluate(() => document.activeElement?.className || document.activeElement?.tagName);
}

// cellOf returns page coordinates of column col of the last visible line
// that matches pred.
async function cellOf(page, pred, col) {
  const lines = await waitScreen(page, 'a line to point at', (l) => l.some(pred));
  const row = lines.findLastIndex(pred);
  return page.evaluate(([r, c]) => {
    const box = document.querySelector('.xterm-screen').getBoundingClientRect();
    const t = window.ahpTest.term;
    return { x: box.left + (c + 0.5) * (box.width / t.cols), y: box.top + (r + 0.5) * (box.height / t.rows) };
  }, [row, col]);
}

function screenText(page) {
  return page.evaluate(() => window.ahpTest.screenText());
}

function text(page, testid) {
  return page.getByTestId(testid).textContent();
}
