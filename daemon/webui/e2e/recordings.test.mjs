// recordings.test.mjs — the recordings view and its player (issue 42) in
// headless Chromium. Run with `npm run e2e` after `make build`.
//
// Two tests:
//   - "fixture": the view over an in-page fake session whose recording is
//     generated (its keyframes' screens are the output before them), so the
//     player's DOM, keys, timeline and layout are checked with any daemon:
//     a seek past a keyframe shows the lines printed by then, space and
//     the arrows, speed, markers, a bad line's error; screenshots at 1280
//     and 390 px wide, where nothing runs past the window.
//   - "daemon": bin/ahpd records a terminal made with `ahpctl terminal
//     create --record` (config: a keyframe every second of output), opened
//     with the admin token; commands typed in the page; the
//     recordings view lists the live recording and its player, sought to a
//     point past a keyframe, shows the screen cell for cell as a fresh
//     terminal fed the whole recording from its start up to that point, with
//     the shell's output by then and not after; a view-role link for that
//     terminal lists only its recordings, and another terminal's recording
//     answers not-found; "● live" follows the recording as another tab
//     types. Skipped when the daemon has no recordings/list
//     (unless CI=true).
//
// Environment: as browser.test.mjs (AHPD_BIN, AHPCTL_BIN, CHROMIUM_BIN,
// ARTIFACTS_DIR, CI). About 15 s.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AHPCTL_BIN, AHPD_BIN, ARTIFACTS_DIR, CHROMIUM_ARGS, CHROMIUM_BIN, CI, run, scratch, startDaemon, until, waitAttached, waitFor } from './common.mjs';

const ARTIFACTS = ['recordings-fixture-1280.png', 'recordings-fixture-390.png', 'recordings-list.png',
  'recordings-player-1280.png', 'recordings-player-390.png', 'recordings-view-role.png',
  'recordings-failure.png', 'recordings-daemon.log'];
const CHANNEL = 'ahp-terminal:/rec'; // the recorded terminal of the daemon test

const missing = !existsSync(CHROMIUM_BIN) ? `no browser at ${CHROMIUM_BIN} (apt-get install chromium)`
  : !existsSync(AHPD_BIN) ? `no daemon at ${AHPD_BIN} (make build)`
    : !existsSync(AHPCTL_BIN) ? `no ahpctl at ${AHPCTL_BIN} (make build)` : null;
if (missing && CI) throw new Error(`e2e: ${missing}`);

// setup starts a daemon (config text in its own file) and a browser, and
// registers their cleanup on t.
async function setup(t, prefix, config, artifacts) {
  const { chromium } = await import('playwright-core');
  const { tmp, home } = await scratch(prefix, artifacts);
  const stateDir = join(tmp, 'state');
  const controlSock = join(tmp, 'control.sock');
  const configFile = join(tmp, 'config.toml');
  await writeFile(configFile, config);
  const out = [];
  const ctx = { tmp, stateDir, controlSock, browser: null, page: null, passed: false };
  const { daemon, link } = startDaemon(home, ['--listen', '127.0.0.1:0', '--state-dir', stateDir, '--control', controlSock,
    '--config', configFile, '--print-link'], out);
  t.after(async () => {
    if (!ctx.passed && ctx.page && !ctx.page.isClosed()) {
      await ctx.page.screenshot({ path: join(ARTIFACTS_DIR, 'recordings-failure.png'), timeout: 3000 }).catch(() => {});
    }
    await ctx.browser?.close().catch(() => {});
    if (daemon.exitCode === null) daemon.kill('SIGKILL');
    await writeFile(join(ARTIFACTS_DIR, 'recordings-daemon.log'), out.join('')).catch(() => {});
    // The shell writes its history when the killed daemon hangs it up, maybe
    // while this runs: rm retries on ENOTEMPTY.
    await rm(tmp, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
  });
  ctx.url = await link;
  ctx.ctl = (...args) => run(AHPCTL_BIN, args, { AHP_CONTROL: controlSock });
  ctx.browser = await chromium.launch({ executablePath: CHROMIUM_BIN, args: CHROMIUM_ARGS });
  return ctx;
}

// noOverflow checks that nothing of the recordings view runs past the window.
async function noOverflow(page, what) {
  const r = await page.evaluate(() => {
    const w = window.innerWidth;
    const bad = [];
    for (const sel of ['[data-testid=recordings]', '.rec-bar', '.rec-controls', '[data-testid=player-play]',
      '[data-testid=player-time]', '[data-testid=player-timeline]', '[data-testid=player-speed]', '[data-testid=recordings-close]',
      '[data-testid=status] > *', '[data-testid=recordings-toggle]']) {
      for (const e of document.querySelectorAll(sel)) {
        const b = e.getBoundingClientRect();
        if (b.width && (b.left < -0.5 || b.right > w + 0.5)) bad.push(`${sel} ${b.left}..${b.right} of ${w}`);
      }
    }
    return { bad, scroll: document.documentElement.scrollWidth, w };
  });
  assert.deepEqual(r.bad, [], `${what}: past the window`);
  assert.ok(r.scroll <= r.w, `${what}: the page scrolls sideways (${r.scroll} > ${r.w})`);
}

const playerState = (page) => page.evaluate(() => window.ahpTest.recordings.state());

test('browser: recordings view over a fixture: seek, keys, speed, markers, layout', {
  skip: missing ?? false,
  timeout: 60_000,
}, async (t) => {
  const ctx = await setup(t, 'ahpd-e2e-recfix-', '', ['recordings-fixture-1280.png', 'recordings-fixture-390.png', 'recordings-failure.png']);
  const context = await ctx.browser.newContext({ viewport: { width: 1280, height: 720 }, deviceScaleFactor: 1 });
  const page = ctx.page = await context.newPage();
  await page.goto(ctx.url.replace('/#', '/?renderer=dom#'));
  await waitAttached(page);

  // The fixture: 40 lines, one every 0.5 s, a resize to 100x30 at 10 s, a
  // marker at 12 s and an audit line; a keyframe every 8 events whose
  // screen is the output before it (no line scrolls off, so it reproduces
  // the screen). The fake session answers recordings/* from it.
  await page.evaluate(() => {
    const enc = new TextEncoder();
    const dec = new TextDecoder();
    const lines = ['{"version":2,"width":80,"height":24,"timestamp":1765120000,"title":"fixture"}'];
    const evs = [];
    for (let i = 0; i < 40; i++) {
      evs.push([i * 0.5, 'o', `${i === 0 ? '' : '\r\n'}fixture line ${i}`]);
      if (i === 20) evs.push([10, 'r', '100x30']);
      if (i === 24) evs.push([12, 'm', 'dropped 7 bytes']);
    }
    const keyframes = [];
    let off = enc.encode(lines[0] + '\n').length;
    let screen = '';
    let size = [80, 24];
    evs.forEach((e, i) => {
      const l = JSON.stringify(e);
      if (i % 8 === 0 && i) keyframes.push({ time: e[0], offset: off, cols: size[0], rows: size[1], screen });
      if (e[1] === 'o') screen += e[2];
      if (e[1] === 'r') size = e[2].split('x').map(Number);
      off += enc.encode(l + '\n').length;
      lines.push(l);
    });
    const good = enc.encode(lines.join('\n') + '\n');
    const bad = enc.encode(lines.slice(0, 30).join('\n') + '\n[99, "o"]\n');
    const rec = (id, bytes, duration) => ({
      id, channel: 'ahp-terminal:/shell', started: '2026-12-07T12:00:00Z', ended: '2026-12-07T12:00:20Z', live: false,
      bytes: bytes.length, duration, rows: 24, cols: 80, title: id, input: false,
    });
    const files = { fixture: good, broken: bad };
    window.fixture = { evs, keyframes, requests: [] };
    window.fakeSession = {
      async request(method, p) {
        window.fixture.requests.push(method);
        await new Promise((r) => setTimeout(r, 5));
        // Two pages of one: the second after the "older recordings" click.
        if (method === 'recordings/list') {
          return p.after === undefined ? { recordings: [rec('fixture', good, 19.5)], next: 'cursor 1' }
            : p.after === 'cursor 1' ? { recordings: [rec('broken', bad, 19.5)], next: null } : { error: `bad cursor ${p.after}` };
        }
        const b = files[p.id];
        if (!b) throw Object.assign(new Error('recording not found'), { code: -32002 });
        if (method === 'recordings/index') {
          return { keyframes: p.id === 'fixture' ? keyframes.map(({ screen: _, ...k }) => k) : [],
            audit: [{ type: 'audit', time: 3, event: 'attach', viewer: 'alice', role: 'control', token: 'tok1', remote: '127.0.0.1:1' }], dropped: 0 };
        }
        if (method === 'recordings/keyframe') {
          // In pieces of 64 bytes, as the daemon answers a screen larger
          // than a message (a request counted once per keyframe).
          const from = p.from ?? 0;
          if (from) window.fixture.requests.pop();
          const k = keyframes[p.n];
          const b = enc.encode(k.screen);
          const end = Math.min(b.length, from + 64);
          return { ...k, screen: dec.decode(b.subarray(from, end)), from, next: end < b.length ? end : null, bytes: b.length };
        }
        if (method === 'recordings/read') {
          let end = Math.min(b.length, p.offset + Math.min(p.maxBytes, 300));
          if (end < b.length) end = b.lastIndexOf(10, end - 1) + 1;
          return { data: dec.decode(b.subarray(p.offset, end)), offset: p.offset, nextOffset: end, size: b.length, eof: end >= b.length, live: false };
        }
        throw new Error(`unexpected ${method}`);
      },
    };
    window.ahpTest.recordings.open(window.fakeSession, 'ahp-terminal:/shell');
  });
  await waitFor(page, 'the first page', () => window.ahpTest.recordings.state().list.length === 1);
  assert.equal((await playerState(page)).more, true);
  await page.getByTestId('recordings-more').click();
  await waitFor(page, 'the list', () => window.ahpTest.recordings.state().list.length === 2);
  assert.equal(await page.getByTestId('recording-item').count(), 2);
  assert.equal(await page.getByTestId('recordings-more').count(), 0, 'no older recordings after the last page');
  assert.equal((await playerState(page)).message, '');
  await page.getByTestId('recording-item').first().click();
  await waitFor(page, 'the player at 0', () => {
    const p = window.ahpTest.recordings.state().player;
    return p && !p.seeking;
  });
  assert.equal((await playerState(page)).player.error, null);
  assert.equal((await playerState(page)).player.keyframes, 6, 'five keyframes and the header');
  // The lines printed by then; the last rows of them once they scroll.
  const expected = (t, rows = 30) => page.evaluate((t) => window.fixture.evs.filter((e) => e[1] === 'o' && e[0] <= t)
    .map((e) => e[2]).join(''), t).then((text) => text.split('\r\n').slice(-rows).join('\n'));
  const shown = async () => {
    await page.evaluate(() => window.ahpTest.recordings.flush());
    return (await page.evaluate(() => window.ahpTest.recordings.screenText())).replace(/\n+$/, '');
  };
  assert.equal(await shown(), 'fixture line 0');

  // A click on the timeline seeks there; the keyframe before it is used.
  const box = await page.getByTestId('player-timeline').boundingBox();
  await page.mouse.click(box.x + 7 + (box.width - 14) * (13.3 / 19.5), box.y + box.height / 2);
  await waitFor(page, 'the seek', () => {
    const p = window.ahpTest.recordings.state().player;
    return !p.seeking && p.time > 12.5 && p.time < 14;
  });
  let s = await playerState(page);
  assert.equal(await shown(), await expected(s.player.time));
  assert.deepEqual([s.termCols, s.termRows], [100, 30], 'the resize at 10 s applies');
  assert.match(await page.getByTestId('player-time').textContent(), /^0:1[23] \/ 0:19$/);

  // A drag over the timeline: one seek at a time, then the latest asked,
  // ending on the screen of where the thumb was let go.
  const before = await page.evaluate(() => window.fixture.requests.filter((m) => m === 'recordings/keyframe').length);
  await page.mouse.move(box.x + 7 + (box.width - 14) * (13.3 / 19.5), box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + 7 + (box.width - 14) * (2.2 / 19.5), box.y + box.height / 2, { steps: 40 });
  await page.mouse.move(box.x + 7 + (box.width - 14) * (13.3 / 19.5), box.y + box.height / 2, { steps: 40 });
  await page.mouse.up();
  await waitFor(page, 'the drag\'s last seek', () => {
    const p = window.ahpTest.recordings.state().player;
    return !p.seeking && p.time > 12.5 && p.time < 14;
  });
  await page.waitForTimeout(100);
  const during = await page.evaluate(() => window.fixture.requests.filter((m) => m === 'recordings/keyframe').length) - before;
  // At most one read per keyframe stretch crossed, each way (the last
  // keyframe's screen is kept), whatever the number of moves.
  assert.ok(during <= 2 * 6, `${during} keyframe reads for 80 moves over 6 keyframes`);
  t.diagnostic(`a drag of 80 moves: ${during} keyframe reads`);
  s = await playerState(page);
  assert.equal(await shown(), await expected(s.player.time));

  // Keys: ← seeks back 5 s (before the resize: the keyframe's size), space plays.
  await page.keyboard.press('ArrowLeft');
  await waitFor(page, 'the seek back', () => !window.ahpTest.recordings.state().player.seeking);
  s = await playerState(page);
  assert.ok(s.player.time > 8 && s.player.time < 9, `time ${s.player.time}`);
  assert.equal(await shown(), await expected(s.player.time));
  assert.deepEqual([s.termCols, s.termRows], [80, 24]);
  await page.getByTestId('player-speed').selectOption('8');
  await page.getByTestId('player-term').click();
  await page.keyboard.press(' ');
  await waitFor(page, 'playing to the end', () => window.ahpTest.recordings.state().player.ended, undefined, 10_000);
  assert.equal(await shown(), await expected(19.5));
  assert.equal((await playerState(page)).player.speed, 8);

  // Markers: the "m" event and the audit line, placed on the timeline.
  const marks = await page.getByTestId('player-marker').evaluateAll((ms) => ms.map((m) => [m.dataset.kind, Number(m.dataset.time), m.title]));
  assert.deepEqual(marks, [['audit', 3, '0:03 attach alice (control) from 127.0.0.1:1'], ['marker', 12, '0:12 dropped 7 bytes']]);
  await page.screenshot({ path: join(ARTIFACTS_DIR, 'recordings-fixture-1280.png') });
  await noOverflow(page, '1280 px');

  // A phone: the controls wrap, nothing runs past the window.
  await page.setViewportSize({ width: 390, height: 740 });
  await page.waitForTimeout(200);
  await noOverflow(page, '390 px');
  const fit = await playerState(page);
  assert.ok(fit.fontSize < 13, `the player's font fits 100 columns into 390 px (${fit.fontSize})`);
  await page.screenshot({ path: join(ARTIFACTS_DIR, 'recordings-fixture-390.png') });
  await page.setViewportSize({ width: 320, height: 640 });
  await page.waitForTimeout(200);
  await noOverflow(page, '320 px');
  await page.setViewportSize({ width: 1280, height: 720 });

  // Space on the focused play button toggles once, not twice (click + key).
  await page.getByTestId('player-speed').selectOption('0.5');
  await page.getByTestId('player-play').click();
  await waitFor(page, 'playing again', () => window.ahpTest.recordings.state().player.playing);
  await page.keyboard.press(' ');
  await page.waitForTimeout(100);
  assert.equal((await playerState(page)).player.playing, false, 'space on the play button paused');
  await page.keyboard.press(' ');
  await page.waitForTimeout(100);
  assert.equal((await playerState(page)).player.playing, true, 'space on the play button played');

  // A bad line says so, plainly.
  await page.getByTestId('player-back').click();
  await waitFor(page, 'the list again', () => window.ahpTest.recordings.state().list.length === 1);
  await page.getByTestId('recordings-more').click();
  await waitFor(page, 'its older page again', () => window.ahpTest.recordings.state().list.length === 2);
  await page.getByTestId('recording-item').nth(1).click();
  await waitFor(page, 'the player', () => window.ahpTest.recordings.state().player?.seeking === false);
  await page.evaluate(() => window.ahpTest.recordings.player.seek(19));
  assert.match(await page.getByTestId('player-error').textContent(),
    /^Cannot play this recording: event line \d+ of this read: an event is \[seconds, code, data\]: "\[99, \\"o\\"\]"$/);

  // Escape closes the view and gives the keys back to the terminal.
  await page.keyboard.press('Escape');
  await waitFor(page, 'the view closed', () => !window.ahpTest.recordings.state().shown);
  assert.equal(await page.evaluate(() => document.activeElement?.className), 'xterm-helper-textarea');
  ctx.passed = true;
});

// typeLine types a command into the page's terminal and waits until its
// output line is on the screen.
async function typeLine(page, cmd, want) {
  await page.keyboard.type(cmd + '\n', { delay: 5 });
  await waitFor(page, `"${want}" on the screen`, (w) => window.ahpTest.screenText().split('\n').some((l) => l.trim() === w), want);
}

test('browser: a recorded terminal, sought past a keyframe, shows that moment cell for cell; view role', {
  skip: missing ?? false,
  timeout: 60_000,
}, async (t) => {
  // A keyframe after each second with output (the smallest interval), so
  // commands 1.5 s apart each fall past one. The terminal recorded is made
  // with ahpctl terminal create --record; the page opens it with the admin
  // token.
  const ctx = await setup(t, 'ahpd-e2e-rec-', 'recordingKeyframeInterval = "1s"\n',
    ['recordings-list.png', 'recordings-player-1280.png', 'recordings-player-390.png', 'recordings-view-role.png',
      'recordings-failure.png', 'recordings-daemon.log']);
  const context = await ctx.browser.newContext({ viewport: { width: 1280, height: 720 }, deviceScaleFactor: 1 });
  const page = ctx.page = await context.newPage();
  const base = new URL(ctx.url).origin;
  const admin = (await readFile(join(ctx.stateDir, 'admin.token'), 'utf8')).trim();
  const created = await ctx.ctl('terminal', 'create', '--id', 'rec', '--record', '--', '/bin/sh').catch((e) => e);
  if (created instanceof Error && /record/.test(created.message)) {
    if (CI) throw created;
    t.skip(`ahpctl cannot record yet: ${created.message.split('\n')[0]}`);
    ctx.passed = true;
    return;
  }
  if (created instanceof Error) throw created;
  assert.equal(created.trim(), CHANNEL);
  await page.goto(`${base}/?renderer=dom#token=${encodeURIComponent(admin)}&channel=${CHANNEL}`);
  await waitAttached(page);
  const has = await page.evaluate(() => window.ahpTest.client.session.request('recordings/list', {})
    .then(() => true, (e) => (e.code === -32601 ? false : Promise.reject(e))));
  if (!has) {
    if (CI) assert.fail('the daemon has no recordings/list');
    t.skip('the daemon has no recordings/list yet');
    ctx.passed = true;
    return;
  }

  await typeLine(page, 'echo first-$((6*7))', 'first-42');
  await page.waitForTimeout(1500);
  await typeLine(page, 'echo second-$((2+3))', 'second-5');
  await page.waitForTimeout(1500);
  await typeLine(page, 'printf "third %s\\n" a b c', 'third c');
  await page.waitForTimeout(1500);
  await typeLine(page, 'echo fourth', 'fourth');

  // The view lists the live recording.
  await page.getByTestId('recordings-toggle').click();
  await waitFor(page, 'the recording listed', () => window.ahpTest.recordings.state().list.length >= 1);
  const list = (await playerState(page)).list;
  assert.equal(list.length, 1, JSON.stringify(list));
  assert.equal(list[0].channel, CHANNEL);
  assert.equal(list[0].live, true);
  assert.equal(await page.getByTestId('recording-item').first().getAttribute('data-live'), 'true');
  await page.screenshot({ path: join(ARTIFACTS_DIR, 'recordings-list.png') });
  await page.getByTestId('recording-item').first().click();
  await waitFor(page, 'the player', () => {
    const p = window.ahpTest.recordings.state().player;
    return p && !p.seeking;
  });
  let s = await playerState(page);
  assert.equal(s.player.error, null);
  assert.ok(s.player.keyframes >= 3, `keyframes ${s.player.keyframes}`);

  // The moment: between "second-5" printed and the printf typed. Its
  // keyframe must be past the first (time > 0).
  const moment = await page.evaluate(async (id) => {
    const session = window.ahpTest.client.session;
    let off = 0;
    let text = '';
    for (;;) {
      const r = await session.request('recordings/read', { id, offset: off, maxBytes: 65536 });
      text += r.data;
      off = r.nextOffset;
      if (r.eof || r.nextOffset >= r.size) break;
    }
    const lines = text.split('\n').filter(Boolean);
    const header = JSON.parse(lines[0]);
    const evs = lines.slice(1).map((l) => JSON.parse(l));
    const out = evs.filter((e) => e[1] === 'o');
    const printed = out.find((e) => e[2].includes('second-5\r\n'));
    const next = out.find((e) => e[0] > printed[0] + 0.5);
    return { header, evs, target: (printed[0] + next[0]) / 2 };
  }, list[0].id);
  await page.evaluate((t) => window.ahpTest.recordings.player.seek(t), moment.target);
  await waitFor(page, 'the seek', () => !window.ahpTest.recordings.state().player.seeking);
  s = await playerState(page);
  assert.equal(s.player.error, null);
  const kf = await page.evaluate((t) => window.ahpTest.recordings.player.keyframeAt(t), moment.target);
  assert.ok(kf.n >= 1 && kf.time > 0, `the seek went through keyframe ${kf.n} at ${kf.time}`);

  // The reference: a fresh terminal of the header's size fed every event
  // from the start up to the target. The player's screen must equal it,
  // cell for cell (each row's text, untrimmed), and the cursor too.
  const cmp = await page.evaluate(async ({ header, evs, target }) => {
    const rec = window.ahpTest.recordings;
    await rec.flush();
    const Terminal = rec.term.constructor;
    const ref = new Terminal({ cols: header.width, rows: header.height, scrollback: 0, allowProposedApi: true });
    // Out of the page's flow: a flex item of body would take the live
    // terminal's height (and the page would ask the host for a new size).
    const host = document.createElement('div');
    host.style.cssText = 'position: fixed; left: -10000px; top: 0;';
    document.body.append(host);
    ref.open(host);
    for (const [time, code, data] of evs) {
      if (time > target) break;
      if (code === 'o') await new Promise((r) => ref.write(data, r));
      if (code === 'r') {
        const [c, rr] = data.split('x').map(Number);
        ref.resize(c, rr);
      }
    }
    const rows = (t) => {
      const b = t.buffer.active;
      const out = [];
      for (let y = 0; y < t.rows; y++) out.push(b.getLine(b.viewportY + y).translateToString(false));
      return out;
    };
    const got = { size: [rec.term.cols, rec.term.rows], cursor: [rec.term.buffer.active.cursorX, rec.term.buffer.active.cursorY], rows: rows(rec.term) };
    const want = { size: [ref.cols, ref.rows], cursor: [ref.buffer.active.cursorX, ref.buffer.active.cursorY], rows: rows(ref) };
    ref.dispose();
    host.remove();
    return { got, want };
  }, moment);
  assert.deepEqual(cmp.got.size, cmp.want.size, 'size');
  for (let y = 0; y < cmp.want.rows.length; y++) assert.equal(cmp.got.rows[y], cmp.want.rows[y], `row ${y}`);
  assert.deepEqual(cmp.got.cursor, cmp.want.cursor, 'cursor');
  const text = cmp.got.rows.join('\n');
  assert.match(text, /^first-42 *$/m);
  assert.match(text, /^second-5 *$/m);
  assert.doesNotMatch(text, /third/);
  await page.screenshot({ path: join(ARTIFACTS_DIR, 'recordings-player-1280.png') });
  await noOverflow(page, '1280 px');

  // End seeks to the end, where "fourth" was printed.
  await page.getByTestId('player-term').click();
  await page.keyboard.press('End');
  await waitFor(page, 'the seek to the end', () => !window.ahpTest.recordings.state().player.seeking);
  await page.evaluate(() => window.ahpTest.recordings.flush());
  assert.match(await page.evaluate(() => window.ahpTest.recordings.screenText()), /^fourth$/m);
  // ● live follows the recording: a command typed in another tab shows
  // up in the player (read again at the end every second).
  await page.getByTestId('player-live').click();
  await waitFor(page, 'following', () => window.ahpTest.recordings.state().player.playing);
  const page2 = await context.newPage();
  await page2.goto(`${base}/?renderer=dom#token=${encodeURIComponent(admin)}&channel=${CHANNEL}`);
  await waitAttached(page2);
  await typeLine(page2, 'echo live-$((3*3))', 'live-9');
  await waitFor(page, 'the live output in the player', () => /^live-9 *$/m.test(window.ahpTest.recordings.screenText()), undefined, 8000);
  await page2.close();
  await page.keyboard.press(' ');
  await page.setViewportSize({ width: 390, height: 740 });
  await page.waitForTimeout(200);
  await noOverflow(page, '390 px');
  await page.screenshot({ path: join(ARTIFACTS_DIR, 'recordings-player-390.png') });
  await page.setViewportSize({ width: 1280, height: 720 });

  // A view-role link for this terminal sees its recordings only: another
  // terminal's recording is not found (as an id that does not exist).
  const other = (await ctx.ctl('terminal', 'create', '--id', 'other', '--record', '--', '/bin/sh')).trim();
  await until('the other recording', async () => (await ctx.ctl('recordings', 'list')).includes('other'), 5000);
  const all = await page.evaluate(() => window.ahpTest.client.session.request('recordings/list', {}));
  const otherRec = all.recordings.find((r) => r.channel === other);
  assert.ok(otherRec, `admin's list has ${other}: ${JSON.stringify(all)}`);
  const viewUrl = (await ctx.ctl('open', '--role', 'view', CHANNEL)).trim();
  const vpage = await context.newPage();
  await vpage.goto(viewUrl.replace('/#', '/?renderer=dom#'));
  await waitAttached(vpage);
  const seen = await vpage.evaluate(async (otherId) => {
    const session = window.ahpTest.client.session;
    const l = await session.request('recordings/list', {});
    const err = (p) => p.then(() => null, (e) => ({ code: e.code, message: e.message }));
    return {
      role: session.role,
      channels: [...new Set(l.recordings.map((r) => r.channel))],
      read: await err(session.request('recordings/read', { id: otherId, offset: 0 })),
      unknown: await err(session.request('recordings/read', { id: 'no-such-recording', offset: 0 })),
      index: await err(session.request('recordings/index', { id: otherId })),
    };
  }, otherRec.id);
  assert.equal(seen.role, 'view');
  assert.deepEqual(seen.channels, [CHANNEL]);
  assert.ok(seen.read, 'the other terminal\'s recording was readable with a view token for /rec');
  // A forbidden id answers as an unknown one (the message names the id asked).
  const same = (e, id) => ({ code: e?.code, message: e?.message.replace(id, 'ID') });
  assert.deepEqual(same(seen.read, otherRec.id), same(seen.unknown, 'no-such-recording'), 'read');
  assert.deepEqual(same(seen.index, otherRec.id), same(seen.unknown, 'no-such-recording'), 'index');
  assert.equal(seen.unknown.code, -32002);
  // And its page's view lists and plays it.
  await vpage.getByTestId('recordings-toggle').click();
  await waitFor(vpage, 'the list', () => window.ahpTest.recordings.state().list.length >= 1);
  await vpage.getByTestId('recording-item').first().click();
  await waitFor(vpage, 'the player', () => {
    const p = window.ahpTest.recordings.state().player;
    return p && !p.seeking && !p.error;
  });
  await vpage.getByTestId('player-term').click();
  await vpage.keyboard.press('End');
  await waitFor(vpage, 'the end', () => !window.ahpTest.recordings.state().player.seeking);
  await vpage.evaluate(() => window.ahpTest.recordings.flush());
  assert.match(await vpage.evaluate(() => window.ahpTest.recordings.screenText()), /^fourth$/m);
  await vpage.screenshot({ path: join(ARTIFACTS_DIR, 'recordings-view-role.png') });
  ctx.passed = true;
});
