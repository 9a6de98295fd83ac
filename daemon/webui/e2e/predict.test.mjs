// predict.test.mjs — predictive echo (predict.js) in headless Chromium,
// through the link emulator (bench/linkemu) at 200 ms round trip, with
// the setting left at auto (issue 40):
//   - at a bash prompt a typed key is on the page (its overlay cell in the
//     DOM at the first animation frame after the keydown, ≤ 20 ms, measured
//     in the page) while the host's echo takes ≥ 200 ms;
//   - once the output has settled no overlay cell remains, and the page's
//     screen equals a fresh snapshot (a second, view-only page) cell by cell;
//   - at a `read -s` prompt, and in vim's insert mode (the alternate
//     screen), the keys typed leave nothing wrong once settled.
//
// Environment: as browser.test.mjs (AHPD_BIN, AHPCTL_BIN, CHROMIUM_BIN,
// ARTIFACTS_DIR, CI), plus LINKEMU_BIN (default: built with `go build` from
// bench/linkemu into a temporary directory). Loopback only; every wait is
// bounded.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AHPCTL_BIN, AHPD_BIN, ARTIFACTS_DIR, CHROMIUM_ARGS, CHROMIUM_BIN, CI, printedLink, run, STEP_MS, until, waitAttached, waitFor, within } from './common.mjs';

const repoRoot = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../..');
const CHANNEL = 'ahp-terminal:/shell';
const PROMPT = 'pe2e$ ';
const RTT_MS = 200;
const LAUNCH_MS = 30_000;
const BASH = ['/bin/bash', '/usr/bin/bash'].find((p) => existsSync(p));
const VIM = ['/usr/bin/vim', '/bin/vim', '/usr/bin/vi'].find((p) => existsSync(p));

const missing = !existsSync(CHROMIUM_BIN) ? `no browser at ${CHROMIUM_BIN} (apt-get install chromium)`
  : !existsSync(AHPD_BIN) ? `no daemon at ${AHPD_BIN} (make build)`
    : !existsSync(AHPCTL_BIN) ? `no ahpctl at ${AHPCTL_BIN} (make build)`
      : !BASH ? 'no bash' : null;
if (missing && CI) throw new Error(`e2e: ${missing}`);

test('predictive echo at 200 ms round trip: keys at once, nothing wrong once settled', { skip: missing ?? false, timeout: 180_000 }, async (t) => {
  const { chromium } = await import('playwright-core');
  await mkdir(ARTIFACTS_DIR, { recursive: true });
  for (const f of ['predict.png', 'predict-daemon.log', 'predict-e2e.log']) await rm(join(ARTIFACTS_DIR, f), { force: true });
  const tmp = await mkdtemp(join(tmpdir(), 'ahpd-predict-'));
  const home = join(tmp, 'home');
  await mkdir(home, { recursive: true });
  // bash -l reads /etc/profile (which may set PS1), then ~/.bash_profile.
  await writeFile(join(home, '.bash_profile'), `PS1='${PROMPT}'\nunset PROMPT_COMMAND\n`);

  const log = [];
  const note = (line) => log.push(`${new Date().toISOString()} ${line}`);
  const daemonOut = [];
  let daemon = null;
  let emu = null;
  let browser = null;
  let page = null;
  let passed = false;
  t.after(async () => {
    if (!passed && page && !page.isClosed()) await page.screenshot({ path: join(ARTIFACTS_DIR, 'predict.png'), timeout: 3000 }).catch(() => {});
    await browser?.close().catch(() => {});
    if (daemon && daemon.exitCode === null) daemon.kill('SIGKILL');
    if (emu && emu.exitCode === null) emu.kill('SIGKILL');
    await writeFile(join(ARTIFACTS_DIR, 'predict-daemon.log'), daemonOut.join('')).catch(() => {});
    await writeFile(join(ARTIFACTS_DIR, 'predict-e2e.log'), log.join('\n') + '\n').catch(() => {});
    // The shell writes its history when the killed daemon hangs it up, maybe
    // while this runs: rm retries on ENOTEMPTY.
    await rm(tmp, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
  });

  // ---- the link emulator and the daemon behind it ----

  let linkemu = process.env.LINKEMU_BIN;
  if (!linkemu) {
    linkemu = join(tmp, 'linkemu');
    note('step: go build ./bench/linkemu');
    await run('go', ['build', '-C', repoRoot, '-o', linkemu, './bench/linkemu'], { GOFLAGS: '-tags=grpcnotrace' }, 120_000).catch((e) => {
      throw new Error(`building the link emulator (set LINKEMU_BIN to skip): ${e.message}`);
    });
  }
  // The emulator dials the daemon per connection, so it starts first and
  // the daemon is told its address as the URL browsers open (publicUrl:
  // the page's Origin is the emulator's).
  const port = await freePort();
  emu = spawn(linkemu, ['-target', `127.0.0.1:${port}`, '-rtt', `${RTT_MS}ms`], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  const emuAddr = await within(STEP_MS, 'the link emulator to listen', new Promise((res, rej) => {
    let buf = '';
    emu.stdout.setEncoding('utf8').on('data', (s) => {
      buf += s;
      const m = /linkemu listening on (\S+)/.exec(buf);
      if (m) res(m[1]);
    });
    emu.stderr.setEncoding('utf8').on('data', (s) => note(`linkemu: ${s.trim()}`));
    emu.on('exit', (c) => rej(new Error(`linkemu exited ${c}: ${buf}`)));
  }));
  note(`linkemu ${emuAddr} → 127.0.0.1:${port}`);

  const controlSock = join(tmp, 'control.sock');
  daemon = spawn(AHPD_BIN, ['--listen', `127.0.0.1:${port}`, '--public-url', `http://${emuAddr}/`,
    '--state-dir', join(tmp, 'state'), '--control', controlSock, '--print-link'], {
    cwd: home,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: home, SHELL: BASH, LANG: 'C.UTF-8', TZ: 'UTC', TERM: 'xterm-256color' },
  });
  const exited = new Promise((res) => daemon.on('exit', (code, signal) => res({ code, signal })));
  daemon.stdout.setEncoding('utf8').on('data', (s) => daemonOut.push(s));
  const url = await printedLink(daemon, daemonOut, exited);
  assert.ok(url.startsWith(`http://${emuAddr}/`), `the link names the emulator: ${url}`);

  // ---- the page ----

  browser = await chromium.launch({ executablePath: CHROMIUM_BIN, args: CHROMIUM_ARGS, timeout: LAUNCH_MS });
  const context = await browser.newContext({ viewport: { width: 1000, height: 600 }, deviceScaleFactor: 1 });
  context.setDefaultTimeout(STEP_MS);
  const problems = [];
  const watch = (p, name) => {
    p.on('pageerror', (e) => problems.push(`${name}: uncaught ${e.message}`));
    p.on('console', (m) => {
      note(`${name} console.${m.type()}: ${m.text()}`);
      if (m.type() === 'error') problems.push(`${name}: console error: ${m.text()}`);
    });
  };
  page = await context.newPage();
  watch(page, 'page');
  await page.goto(url);
  await waitAttached(page);
  await waitScreen(page, 'the prompt', (l) => l.some((x) => x.startsWith(PROMPT)));
  // The page takes the terminal's size now, so that the first key (which
  // makes it the active viewer) does not resize it: a resize voids the
  // predictions.
  await page.evaluate(() => window.ahpTest.view.fitToWindow());
  await waitFor(page, 'the terminal to fit the page', () => {
    const s = window.ahpTest.state();
    return s.terminal.fit && s.termRows === s.terminal.fit.rows && s.termCols === s.terminal.fit.cols;
  });
  await settled(page);
  // auto: predicting needs a measured round trip above 30 ms.
  await waitFor(page, 'a round trip measured by ping', () => window.ahpTest.state().rtt?.srtt > 150);
  const st0 = await page.evaluate(() => window.ahpTest.state());
  note(`rtt ${JSON.stringify(st0.rtt)} predict ${JSON.stringify(st0.terminal.predict)}`);
  assert.equal(st0.terminal.predict.mode, 'auto');
  assert.equal(await page.getByTestId('predict-toggle').textContent(), 'echo auto');

  // In-page measurement: for each printable keydown, when its overlay cell
  // entered the DOM and left it (the host's echo confirmed it), and
  // whether it was there when the next animation frame ran.
  await page.evaluate(() => {
    const layer = document.querySelector('[data-testid=predict-overlay]');
    const rec = (window.__pred = { keys: [], shownEver: new Set() });
    const shownNow = () => new Set([...layer.querySelectorAll('.ahp-predict-cell')].map((c) => c.textContent));
    document.addEventListener('keydown', (ev) => {
      if (ev.key.length !== 1) return;
      const k = { key: ev.key, t0: performance.now(), dom: null, gone: null, frame: null, atFrame: false };
      rec.keys.push(k);
      requestAnimationFrame(() => {
        k.frame = performance.now() - k.t0;
        k.atFrame = shownNow().has(k.key);
      });
    }, true);
    new MutationObserver(() => {
      const now = performance.now();
      const shown = shownNow();
      for (const c of shown) rec.shownEver.add(c);
      for (const k of rec.keys) {
        if (k.dom === null && shown.has(k.key)) k.dom = now - k.t0;
        else if (k.dom !== null && k.gone === null && !shown.has(k.key)) k.gone = now - k.t0;
      }
    }).observe(layer, { childList: true, subtree: true, characterData: true });
  });
  const resetKeys = () => page.evaluate(() => {
    window.__pred.keys = [];
    window.__pred.shownEver = new Set();
  });

  // ---- 1. a shell prompt ----

  // The first key is tentative (nothing is shown until an echo has been
  // seen on this row, mosh's rule); the keys after it are shown at once.
  await page.keyboard.press('e');
  await waitScreen(page, 'the echo of the first key', (l) => l.some((x) => x === `${PROMPT}e`));
  await settled(page);
  await page.keyboard.type('cho ', { delay: 30 });
  await resetKeys();
  const measured = 'qwkj';
  for (const k of measured) {
    await page.keyboard.press(k);
    await page.waitForTimeout(40); // a fast typist: the echo of each comes after the next key
  }
  await waitScreen(page, 'the echo of the typed keys', (l) => l.some((x) => x === `${PROMPT}echo ${measured}`));
  await settled(page);
  const keys = await page.evaluate(() => window.__pred.keys);
  note(`keys ${JSON.stringify(keys)}`);
  for (const k of keys) {
    assert.notEqual(k.dom, null, `key ${k.key}: never shown: ${JSON.stringify(k)}`);
    assert.ok(k.atFrame, `key ${k.key}: not on the page at the first animation frame: ${JSON.stringify(k)}`);
    assert.ok(k.dom <= 20, `key ${k.key}: shown ${k.dom.toFixed(1)} ms after the keydown, want ≤ 20`);
    assert.notEqual(k.gone, null, `key ${k.key}: its overlay was never removed`);
    assert.ok(k.gone >= RTT_MS - 5, `key ${k.key}: echo after ${k.gone.toFixed(1)} ms, want ≥ ${RTT_MS} (the link's round trip)`);
  }
  const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  t.diagnostic(`keydown → overlay in the DOM: median ${med(keys.map((k) => k.dom)).toFixed(1)} ms, max ${Math.max(...keys.map((k) => k.dom)).toFixed(1)} ms; ` +
    `keydown → next animation frame: median ${med(keys.map((k) => k.frame)).toFixed(1)} ms; ` +
    `keydown → echo confirmed: median ${med(keys.map((k) => k.gone)).toFixed(1)} ms, min ${Math.min(...keys.map((k) => k.gone)).toFixed(1)} ms`);
  let st = (await page.evaluate(() => window.ahpTest.state())).terminal.predict;
  // A shell that echoes contradicts nothing. An expiry (an echo later than
  // 2 × srtt + 100 ms) only says the machine was slow: noted, not failed.
  assert.equal(st.stats.contradicted, 0, `a shell that echoes: nothing contradicted: ${JSON.stringify(st)}`);
  if (st.stats.expired > 0) t.diagnostic(`at the prompt ${st.stats.expired} prediction(s) expired before their echo (a loaded machine)`);

  // Edits in the middle of the line (readline inserts and redraws the
  // tail): after each key, what the page shows (its screen with the
  // overlay on top) is the line as it will be once echoed.
  const edits = [
    ['ArrowLeft', `${PROMPT}echo qwkj`],
    ['ArrowLeft', `${PROMPT}echo qwkj`],
    ['Z', `${PROMPT}echo qwZkj`],
    ['Y', `${PROMPT}echo qwZYkj`],
    ['Backspace', `${PROMPT}echo qwZkj`],
    ['ArrowRight', `${PROMPT}echo qwZkj`],
    ['M', `${PROMPT}echo qwZkMj`],
    ['Delete', `${PROMPT}echo qwZkM`],
  ];
  const drawnLines = [];
  for (const [key, want] of edits) {
    await page.keyboard.press(key);
    drawnLines.push([key, await drawnLine(page), want]);
  }
  note(`edits ${JSON.stringify(drawnLines)}`);
  for (const [key, got, want] of drawnLines) assert.equal(got, want, `after ${key} the page shows the line as it will be`);
  await waitScreen(page, 'the echo of the edits', (l) => l.some((x) => x === `${PROMPT}echo qwZkM`));
  await settled(page);
  st = (await page.evaluate(() => window.ahpTest.state())).terminal.predict;
  assert.equal(st.stats.contradicted, 0, `edits in the line: nothing contradicted: ${JSON.stringify(st)}`);
  await page.keyboard.press('Enter');
  await waitScreen(page, 'the command to run and the next prompt', (l) => l.includes('qwZkM') && l.includes(PROMPT));
  await settled(page);
  await sameAsSnapshot(page, 'after the shell prompt');

  // ---- 2. read -s: echo off ----

  await typeText(page, 'read -s pw; echo "got-${#pw}"');
  await page.keyboard.press('Enter');
  await waitScreen(page, 'read -s to wait', (l) => l.some((x) => x.endsWith('echo "got-${#pw}"')));
  await settled(page);
  await resetKeys();
  await page.keyboard.type('secret', { delay: 40 });
  await settled(page);
  const secretShown = await page.evaluate(() => [...window.__pred.shownEver]);
  note(`read -s: shown ${JSON.stringify(secretShown)}`);
  await sameAsSnapshot(page, 'at the read -s prompt');
  await page.keyboard.press('Enter');
  await waitScreen(page, 'read to return', (l) => l.includes('got-6'));
  await settled(page);
  await sameAsSnapshot(page, 'after read -s');
  assert.ok(!(await screenText(page)).includes('secret'), 'the password is not on the screen');
  assert.deepEqual(secretShown, [], 'after Enter prediction is tentative: no key of the password is shown');

  // ---- 3. vim insert mode (the alternate screen) ----

  if (!VIM) {
    t.diagnostic('vim part skipped: no vim or vi installed');
  } else {
    await typeText(page, `${VIM} -u NONE -i NONE -N -n ${join(tmp, 'v.txt')}`);
    await page.keyboard.press('Enter');
    await waitFor(page, 'vim on the alternate screen', () => window.ahpTest.term.buffer.active.type === 'alternate');
    await waitScreen(page, 'vim to draw its screen', (l) => l.filter((x) => x.trimEnd() === '~').length >= 3);
    await resetKeys();
    await page.keyboard.press('i');
    await page.keyboard.type('hello vim', { delay: 30 });
    await page.keyboard.press('Backspace');
    await page.keyboard.press('ArrowLeft');
    await page.keyboard.type('X', { delay: 30 });
    await waitScreen(page, 'the text in vim', (l) => l.some((x) => x.startsWith('hello vXi')));
    await settled(page);
    const vimShown = await page.evaluate(() => [...window.__pred.shownEver]);
    assert.deepEqual(vimShown, [], 'nothing is predicted on the alternate screen');
    await sameAsSnapshot(page, 'in vim insert mode');
    await page.keyboard.press('Escape');
    await typeText(page, ':q!');
    await page.keyboard.press('Enter');
    await waitFor(page, 'vim to quit', () => window.ahpTest.term.buffer.active.type === 'normal');
    await settled(page);
  }

  // ---- 4. the setting: the status line's button, saved with the prefs ----

  const toggle = page.getByTestId('predict-toggle');
  await toggle.click(); // always
  await toggle.click(); // never
  assert.equal(await toggle.textContent(), 'echo never');
  assert.equal(await page.evaluate(() => JSON.parse(localStorage.getItem('ahpd.prefs')).predict), 'never');
  assert.equal(await page.evaluate(() => document.activeElement?.className), 'xterm-helper-textarea', 'the terminal keeps the keys');
  await resetKeys();
  await page.keyboard.type('nn', { delay: 40 });
  await waitScreen(page, 'the echo with prediction off', (l) => l.some((x) => x === `${PROMPT}nn`));
  assert.deepEqual(await page.evaluate(() => [...window.__pred.shownEver]), [], 'never: nothing predicted');
  await toggle.click();
  assert.equal(await toggle.textContent(), 'echo auto');
  await page.keyboard.press('Backspace');
  await page.keyboard.press('Backspace');
  await settled(page);
  await sameAsSnapshot(page, 'at the end');

  st = (await page.evaluate(() => window.ahpTest.state())).terminal.predict;
  note(`predict stats ${JSON.stringify(st)}`);
  t.diagnostic(`predictor: ${JSON.stringify(st.stats)}`);
  assert.equal(st.stats.contradicted, 0, 'a shell, read -s and vim contradict no prediction');
  assert.deepEqual(problems, [], 'the pages logged errors');
  passed = true;

  // ---- helpers that need the daemon ----

  // sameAsSnapshot opens a view-only page (a fresh subscription: its
  // screen is the host's snapshot) and compares its screen with page's,
  // cell by cell: characters, widths, colours and attributes, and the cursor.
  async function sameAsSnapshot(p, where) {
    const viewUrl = (await run(AHPCTL_BIN, ['open', '--role', 'view', CHANNEL], { AHP_CONTROL: controlSock })).trim();
    const v = await context.newPage();
    watch(v, 'snapshot');
    try {
      await v.goto(viewUrl);
      await waitAttached(v);
      // Both pages follow the same stream from here: they must agree (a
      // bounded wait, for output still on its way to one of them).
      let diff = null;
      await until(() => `${where}: the page to equal a fresh snapshot: ${diff}`, async () => {
        const [a, b] = [await cells(p), await cells(v)];
        diff = compare(a, b);
        return diff === null;
      }, STEP_MS);
    } finally {
      await v.close();
    }
  }
});

// ---- helpers ----

function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.on('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

// settled waits until the page has no prediction pending and no overlay
// cell, and its output has been quiet for two round trips.
async function settled(page) {
  await waitFor(page, 'the predictions to settle', () => {
    const p = window.ahpTest.state().terminal.predict;
    return p.pending === 0 && p.shown === 0;
  });
  // Quiet: no output for two round trips (anything the keys caused has come back).
  let last = null;
  let since = 0;
  await until('the output to be quiet', async () => {
    const n = await page.evaluate(() => window.ahpTest.state().terminal.stream.outputChars);
    if (n !== last) {
      last = n;
      since = Date.now();
    }
    return Date.now() - since >= 2 * RTT_MS;
  }, STEP_MS);
  const p = await page.evaluate(() => window.ahpTest.state().terminal.predict);
  assert.equal(p.pending + p.shown, 0, `predictions left after settling: ${JSON.stringify(p)}`);
}

// compare returns null when the screens a (the page) and b (the snapshot)
// agree cell by cell and no overlay cell is drawn on a, else what differs.
function compare(a, b) {
  if (a.overlay !== 0) return `${a.overlay} overlay cells left on the page`;
  if (a.rows !== b.rows || a.cols !== b.cols || a.type !== b.type) {
    return `size or screen: page ${a.cols}x${a.rows} ${a.type}, snapshot ${b.cols}x${b.rows} ${b.type}`;
  }
  for (let y = 0; y < a.rows; y++) {
    if (JSON.stringify(a.lines[y]) !== JSON.stringify(b.lines[y])) {
      return `row ${y}:\npage:     ${a.text[y]}\nsnapshot: ${b.text[y]}\npage cells:     ${JSON.stringify(a.lines[y])}\nsnapshot cells: ${JSON.stringify(b.lines[y])}`;
    }
  }
  if (a.cursor.join() !== b.cursor.join()) return `cursor: page ${a.cursor}, snapshot ${b.cursor}`;
  return null;
}

// drawnLine returns the cursor's line as the page shows it: the buffer's
// characters with the overlay's predicted cells on top, right-trimmed.
function drawnLine(page) {
  return page.evaluate(() => {
    const b = window.ahpTest.term.buffer.active;
    const chars = [...(b.getLine(b.baseY + b.cursorY)?.translateToString(false) ?? '')];
    for (const c of document.querySelectorAll('[data-testid=predict-overlay] .ahp-predict-cell')) chars[Number(c.dataset.col)] = c.textContent;
    return chars.join('').trimEnd();
  });
}

// cells returns the visible screen: per row, each cell as [chars, width,
// fg, bg, bold, italic, underline, inverse, dim], plus the cursor and the
// number of overlay cells drawn.
function cells(page) {
  return page.evaluate(() => {
    const term = window.ahpTest.term;
    const b = term.buffer.active;
    const lines = [];
    const text = [];
    for (let y = 0; y < term.rows; y++) {
      const line = b.getLine(b.baseY + y);
      const row = [];
      for (let x = 0; x < term.cols; x++) {
        const c = line?.getCell(x);
        row.push(c ? [c.getChars() || ' ', c.getWidth(), c.getFgColorMode(), c.getFgColor(), c.getBgColorMode(), c.getBgColor(),
          c.isBold(), c.isItalic(), c.isUnderline(), c.isInverse(), c.isDim()] : null);
      }
      lines.push(row);
      text.push(line?.translateToString(true) ?? '');
    }
    return {
      rows: term.rows, cols: term.cols, type: b.type, lines, text, cursor: [b.cursorX, b.cursorY],
      overlay: document.querySelectorAll('[data-testid=predict-overlay] > *').length,
    };
  });
}

async function waitScreen(page, what, pred) {
  const deadline = Date.now() + STEP_MS;
  for (;;) {
    const lines = (await screenText(page)).split('\n');
    if (pred(lines)) return lines;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; screen:\n${lines.join('\n')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function screenText(page) {
  return page.evaluate(() => window.ahpTest.screenText());
}

// typeText types text as key presses without waiting for echoes.
function typeText(page, text) {
  return page.keyboard.type(text, { delay: 10 });
}
