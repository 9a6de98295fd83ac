// upgrade.test.mjs — issue 38's done-when: a daemon upgraded in place 20
// times under load while a browser page, `ahpctl attach` and `ahpctl
// forward` are attached to it at once. Run with `make e2e` or `npm run e2e`
// after `make build`.
//
// One daemon (a copy of bin/ahpd in a temp dir, so that a rebuild of bin/
// meanwhile cannot change what it upgrades to) runs the default terminal,
// a /bin/sh. Attached to it:
//   - the page, in headless Chromium (the printed ticket link);
//   - `ahpctl attach ahp-terminal:/shell`, under a pty (`script -qfec`),
//     its output stream kept;
//   - `ahpctl forward 127.0.0.1:0 127.0.0.1:PORT` to a TCP target this test
//     runs, allow-listed, carrying one connection that moves 64 MiB each way
//     in 22 slices: one before the first upgrade, one written just before
//     each upgrade is requested (in flight during the hand-over), the last
//     after the 20th.
// The page types a loop into the shell that prints numbered lines (N1, N2,
// …, 20 every ~20 ms) until a stop file exists. Then 20 upgrades, odd ones
// with `ahpctl daemon upgrade`, even ones with SIGUSR2; after each, the
// test waits for the daemon's "upgraded in place", the page to be attached
// again, attach to have redrawn and (while its transfer lives) forward to
// have resumed. Afterwards the loop is stopped and:
//   - page: 20 closes 1012 seen (its Client's state events), the "Upgrading"
//     banner each time and no other, no restart, no error; the same shell
//     (pid); its xterm buffer holds N1..Nlast (or,
//     where the scrollback cut, a contiguous tail ending at Nlast) once
//     each, in order, and END-last; no banner, notice or console error;
//   - attach: still running, 20 reconnects after "ahpd is upgrading in
//     place", its output stream
//     covers N1..Nlast without a gap (each session's lines consecutive, each
//     snapshot continuing where the last session's output stopped) and ends
//     with END-last; a line typed into it afterwards reaches the shell;
//   - forward: the transfer spanned the upgrades (resumed after each, bytes
//     on their way at one upgrade at least), the sha256 of what each end
//     sent equals that of what the other received,
//     and a new local connection after the last upgrade carries data both
//     ways.
// Each of the three is a subtest of its own, so one failing does not hide
// the others' results.
//
// Environment: as browser.test.mjs (AHPD_BIN, AHPCTL_BIN, CHROMIUM_BIN,
// ARTIFACTS_DIR, CI). Everything is on loopback, every wait is bounded;
// about 15 s on an idle 2-core machine, up to 140 s on a very busy one
// (load average 15); budget 300 s. Artifacts: upgrade.png,
// upgrade-attach.txt (attach's output stream), upgrade-daemon.log,
// upgrade-e2e.log (with the figures), upgrade-failure.png.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AHPCTL_BIN, AHPD_BIN, ARTIFACTS_DIR, CHROMIUM_ARGS, CHROMIUM_BIN, CI, printedLink, run, STEP_MS, until, waitAttached, waitFor, within } from './common.mjs';

const UPGRADES = 20;
const CHANNEL = 'ahp-terminal:/shell';
const PROMPT = 'e2e$ ';
const LAUNCH_MS = 30_000;
const UPGRADE_MS = 60_000; // one upgrade and the reconnects after it (a hang otherwise)
const SCRIPT_BIN = '/usr/bin/script'; // util-linux (bsdutils): attach needs a terminal
const TRANSFER = 64 << 20; // bytes each way through the forward
const SLICES = UPGRADES + 2;
const ARTIFACTS = ['upgrade.png', 'upgrade-failure.png', 'upgrade-attach.txt', 'upgrade-daemon.log', 'upgrade-e2e.log'];

const missing = !existsSync(CHROMIUM_BIN) ? `no browser at ${CHROMIUM_BIN} (apt-get install chromium)`
  : !existsSync(AHPD_BIN) ? `no daemon at ${AHPD_BIN} (make build)`
    : !existsSync(AHPCTL_BIN) ? `no ahpctl at ${AHPCTL_BIN} (make build)`
      : !existsSync(SCRIPT_BIN) ? `no ${SCRIPT_BIN} (apt-get install bsdutils)` : null;
if (missing && CI) throw new Error(`e2e: ${missing}`);

test(`upgrade: ${UPGRADES} upgrades in place under load with a page, ahpctl attach and ahpctl forward attached`, {
  skip: missing ?? false,
  timeout: 300_000,
}, async (t) => {
  const { chromium } = await import('playwright-core');
  await mkdir(ARTIFACTS_DIR, { recursive: true });
  for (const f of ARTIFACTS) await rm(join(ARTIFACTS_DIR, f), { force: true });
  const tmp = await mkdtemp(join(tmpdir(), 'ahpd-e2e-upg-'));
  const home = join(tmp, 'home');
  const stateDir = join(tmp, 'state');
  const controlSock = join(tmp, 'control.sock');
  const stopFile = join(tmp, 'stop');
  await mkdir(home, { recursive: true });
  await mkdir(join(tmp, 'bin'));
  const ahpd = join(tmp, 'bin', 'ahpd');
  const ahpctl = join(tmp, 'bin', 'ahpctl');
  await copyFile(AHPD_BIN, ahpd);
  await copyFile(AHPCTL_BIN, ahpctl);
  await chmod(ahpd, 0o755);
  await chmod(ahpctl, 0o755);
  const shrc = join(home, 'shrc');
  await writeFile(shrc, `PS1='${PROMPT}'\n`);
  const ctl = (...args) => run(ahpctl, ['--control', controlSock, ...args], {}, UPGRADE_MS);

  const t0 = Date.now();
  const log = [];
  const note = (line) => log.push(`${new Date().toISOString()} +${((Date.now() - t0) / 1000).toFixed(1)}s ${line}`);
  const daemonOut = [];
  let daemon = null;
  let daemonExit = null;
  let browser = null;
  let page = null;
  let attach = null;
  let attachOut = '';
  let forward = null;
  let forwardErr = '';
  let target = null;
  const sockets = new Set();
  const problems = [];
  let finished = false; // the end of the body was reached (subtests may have failed)

  t.after(async () => {
    // The loop in the shell ends on the stop file, and on the hangup.
    await writeFile(stopFile, '').catch(() => {});
    if (!finished && page && !page.isClosed()) {
      await page.screenshot({ path: join(ARTIFACTS_DIR, 'upgrade-failure.png'), timeout: 3000 }).catch(() => {});
    }
    await browser?.close().catch(() => {});
    if (attach && attach.exitCode === null && attach.signalCode === null) {
      try { process.kill(-attach.pid, 'SIGKILL'); } catch { /* gone */ }
    }
    if (forward && forward.exitCode === null && forward.signalCode === null) forward.kill('SIGKILL');
    for (const s of sockets) s.destroy();
    target?.close();
    if (daemon && !daemonExit) {
      daemon.kill('SIGTERM');
      const killer = setTimeout(() => daemon.kill('SIGKILL'), 10_000);
      await daemonExited.catch(() => {});
      clearTimeout(killer);
    }
    await writeFile(join(ARTIFACTS_DIR, 'upgrade-daemon.log'), daemonOut.join('')).catch(() => {});
    await writeFile(join(ARTIFACTS_DIR, 'upgrade-attach.txt'), attachOut).catch(() => {});
    await writeFile(join(ARTIFACTS_DIR, 'upgrade-e2e.log'), log.join('\n') + '\n').catch(() => {});
    await rm(tmp, { recursive: true, force: true });
  });

  // ---- the TCP target ---------------------------------------------------------
  // Each accepted connection goes to the queue; the test drives both ends.

  const accepted = [];
  target = net.createServer({ allowHalfOpen: true }, (s) => {
    sockets.add(s);
    accepted.push(s);
  });
  await new Promise((res, rej) => target.listen(0, '127.0.0.1', res).on('error', rej));
  const targetPort = target.address().port;
  const nextAccepted = async (what) => {
    await until(what, () => accepted.length > 0, STEP_MS);
    return accepted.shift();
  };

  // ---- the daemon -------------------------------------------------------------

  daemon = spawn(ahpd, ['--listen', '127.0.0.1:0', '--state-dir', stateDir, '--control', controlSock,
    '--config', 'none', '--print-link'], {
    cwd: home,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: home, SHELL: '/bin/sh', ENV: shrc, PS1: PROMPT, LANG: 'C.UTF-8', TZ: 'UTC' },
  });
  const daemonExited = new Promise((res) => daemon.on('exit', (code, signal) => {
    daemonExit = { code, signal };
    note(`daemon exited code=${code} signal=${signal}`);
    res(daemonExit);
  }));
  daemon.stdout.setEncoding('utf8').on('data', (s) => daemonOut.push(s));
  const url = await printedLink(daemon, daemonOut, daemonExited);
  // The n-th "upgraded in place" line's took= (the daemon's own measure).
  const upgradeLines = () => daemonOut.join('').split('\n').filter((l) => l.includes('msg="upgraded in place"'));
  note(`daemon at ${new URL(url).origin}`);
  await ctl('tcp', 'allow', `127.0.0.1:${targetPort}`);
  const shellPid = async () => JSON.parse(await ctl('channels', 'get', CHANNEL, '-o', 'json')).pid;
  const pidBefore = await shellPid();

  // ---- the page ---------------------------------------------------------------

  browser = await chromium.launch({ executablePath: CHROMIUM_BIN, args: CHROMIUM_ARGS, timeout: LAUNCH_MS });
  const context = await browser.newContext({ viewport: { width: 1000, height: 600 }, deviceScaleFactor: 1 });
  context.setDefaultTimeout(STEP_MS);
  page = await context.newPage();
  page.on('pageerror', (e) => problems.push(`uncaught ${e.message}`));
  page.on('console', (m) => {
    note(`console.${m.type()}: ${m.text()}`);
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });
  await page.goto(url.replace('/#', '/?renderer=dom#'));
  await waitAttached(page);
  // Every state the page's Client goes through, from here on.
  await page.evaluate(() => {
    window.e2eStates = [];
    window.ahpTest.client.on('state', (s) => window.e2eStates.push({
      state: s.state, attempt: s.attempt, retry: 'retryAt' in s, lastClose: s.lastClose?.code ?? null,
      reason: s.lastClose?.reason ?? null, restarted: !!s.restarted, error: s.error ?? null,
    }));
    // Each time the banner over the dimmed screen appears, what it says.
    window.e2eBanners = [];
    const b = document.querySelector('[data-testid=disconnected]');
    let shown = false;
    new MutationObserver(() => {
      if (!b.hidden && !shown) window.e2eBanners.push({ kind: b.dataset.kind, code: b.dataset.code, text: b.textContent });
      shown = !b.hidden;
    }).observe(b, { attributes: true, childList: true, subtree: true, characterData: true });
  });
  const pageConnects = () => page.evaluate(() => window.e2eStates.filter((s) => s.state === 'connected').length);
  await waitFor(page, 'the prompt', (p) => window.ahpTest.screenText().includes(p.trimEnd()), PROMPT);
  note('page attached');

  // ---- ahpctl attach, under a pty ---------------------------------------------
  // Its stdin stays open to the end: script turns EOF on its stdin into a
  // Ctrl-D for the pty, which attach would send to the shell.

  attach = spawn(SCRIPT_BIN, ['-qfec', `exec '${ahpctl}' --control '${controlSock}' attach ${CHANNEL}`, '/dev/null'], {
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true, // its own process group, killed as one
    env: { PATH: '/usr/bin:/bin', HOME: home, LANG: 'C.UTF-8', TERM: 'xterm-256color' },
  });
  const attachExited = new Promise((res) => attach.on('exit', (code, signal) => {
    note(`attach exited code=${code} signal=${signal}`);
    res({ code, signal });
  }));
  attach.stdout.setEncoding('utf8').on('data', (s) => { attachOut += s; });
  attach.stderr.setEncoding('utf8').on('data', (s) => { attachOut += s; });
  await until('ahpctl attach to be attached', () => attachOut.includes(`ahpctl: attached to ${CHANNEL}`), STEP_MS);
  note('attach attached');

  // ---- ahpctl forward and the transfer ----------------------------------------

  forward = spawn(ahpctl, ['--control', controlSock, 'forward', '127.0.0.1:0', `127.0.0.1:${targetPort}`], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { PATH: '/usr/bin:/bin', HOME: home },
  });
  forward.stderr.setEncoding('utf8').on('data', (s) => { forwardErr += s; });
  forward.on('exit', (code, signal) => note(`forward exited code=${code} signal=${signal}`));
  await until('ahpctl forward to listen', () => /listening on 127\.0\.0\.1:\d+/.test(forwardErr), STEP_MS);
  const forwardPort = Number(/listening on 127\.0\.0\.1:(\d+)/.exec(forwardErr)[1]);
  const resumes = () => (forwardErr.match(/: resumed \(attempt \d+\)/g) ?? []).length;

  let allSent = false; // both ends wrote their last slice and their end
  const xfer = transfer(net.connect({ port: forwardPort, host: '127.0.0.1', allowHalfOpen: true }), sockets, () => allSent);
  const far = transfer(await nextAccepted('the forwarded connection at the target'), sockets, () => allSent);
  const sliceBytes = (i) => (i < SLICES - 1 ? Math.floor(TRANSFER / SLICES) : TRANSFER - (SLICES - 1) * Math.floor(TRANSFER / SLICES));
  const sendSlice = (i) => {
    xfer.send(randomBytes(sliceBytes(i)));
    far.send(randomBytes(sliceBytes(i)));
  };
  const xferBroken = () => xfer.error ?? far.error ?? (xfer.endedEarly || far.endedEarly ? 'ended before the last slice' : null);
  sendSlice(0);
  note('transfer started');

  // ---- the load ---------------------------------------------------------------

  await page.getByTestId('terminal').click();
  await page.keyboard.type(`i=0; while [ ! -e ${stopFile} ] && [ $i -lt 400000 ]; do seq -f N%.0f $((i+1)) $((i+20)); i=$((i+20)); sleep 0.02; done; echo END-$i`, { delay: 2 });
  await page.keyboard.press('Enter');
  await waitFor(page, 'numbered lines in the page', () => /^N\d+$/m.test(window.ahpTest.screenText()));
  await until('numbered lines through attach', () => /\nN20\r\n/.test(attachOut), STEP_MS);
  note('load running');

  // ---- the upgrades ---------------------------------------------------------

  const figures = [];
  let forwardFollowed = true;
  const upgradesStart = Date.now();
  for (let i = 1; i <= UPGRADES; i++) {
    sendSlice(i);
    const start = Date.now();
    const attachSessions = countOf(attachOut, '\x1bc\x1b[3J');
    if (i % 2 === 1) {
      const out = await ctl('daemon', 'upgrade');
      assert.ok(out.includes(`(pid ${daemon.pid}, upgrade ${i},`), `daemon upgrade printed ${JSON.stringify(out)}`);
    } else {
      daemon.kill('SIGUSR2');
    }
    await until(`upgrade ${i} in the daemon's log`, () => {
      if (daemonExit) throw new Error(`the daemon exited during upgrade ${i}: ${JSON.stringify(daemonExit)}`);
      return upgradeLines().length >= i;
    }, UPGRADE_MS);
    const upgraded = Date.now() - start;
    const took = /took=(\S+)/.exec(upgradeLines()[i - 1])?.[1];
    // Bytes sent and not yet received when the new binary was up: the
    // transfer was in flight across the hand-over.
    const pending = { up: xfer.sent - far.received, down: far.sent - xfer.received };
    // The three clients come back each on its own; each time is its own.
    const after = (p) => p.then(() => Date.now() - start);
    const [pageBack, attachBack, forwardBack] = await Promise.all([
      after(waitFor(page, `the page to reconnect after upgrade ${i}`, (n) => {
        const s = window.ahpTest.state();
        return window.e2eStates.filter((x) => x.state === 'connected').length >= n &&
          s.connection === 'connected' && s.ready && s.subscriptionId != null;
      }, i, UPGRADE_MS)),
      after(until(() => `ahpctl attach to reconnect after upgrade ${i}; its last status line: ${JSON.stringify(lastStatus(attachOut))}`, () => {
        if (attach.exitCode !== null || attach.signalCode !== null) throw new Error(`ahpctl attach ended during upgrade ${i}:\n${attachOut.slice(-2000)}`);
        return lossesOf(attachOut) >= i && attachOut.lastIndexOf('\x1bc\x1b[3J') > attachOut.lastIndexOf('[ahpctl: ') &&
          countOf(attachOut, '\x1bc\x1b[3J') > attachSessions;
      }, UPGRADE_MS)),
      // The forward is waited for while its transfer is alive; whether it
      // held is the forward subtest's to say, after the upgrades.
      forwardFollowed && !xferBroken()
        ? until(`ahpctl forward to resume after upgrade ${i}`, () => resumes() >= i || xferBroken(), UPGRADE_MS)
          .then(() => (xferBroken() ? null : Date.now() - start), (e) => { note(e.message); forwardFollowed = false; return null; })
        : null,
    ]);
    if (xferBroken() && forwardFollowed) {
      note(`forward: the transfer broke at upgrade ${i}: ${xferBroken()}`);
      forwardFollowed = false;
    }
    figures.push({ i, how: i % 2 ? 'ahpctl' : 'SIGUSR2', took, upgraded, pageBack, attachBack, forwardBack, pending });
    note(`upgrade ${i} (${i % 2 ? 'ahpctl daemon upgrade' : 'SIGUSR2'}): daemon took=${took}, logged after ${upgraded} ms; ` +
      `page back after ${pageBack} ms, attach ${attachBack} ms, forward ${forwardBack ?? '–'} ms; ` +
      `not yet received when logged: ${pending.up} bytes up, ${pending.down} down`);
  }
  const upgradesTook = Date.now() - upgradesStart;
  sendSlice(SLICES - 1);
  xfer.end();
  far.end();
  allSent = true;

  // Stop the load and wait for its last line everywhere.
  await writeFile(stopFile, '');
  await waitFor(page, 'the end of the loop in the page', () => /^END-\d+$/m.test(window.ahpTest.screenText()));
  const last = Number(/^END-(\d+)$/m.exec(await page.evaluate(() => window.ahpTest.screenText()))[1]);
  note(`the loop printed ${last} lines`);
  const summary = summarize(figures);
  note(`${UPGRADES} upgrades in ${upgradesTook} ms; ${summary}`);
  t.diagnostic(`${UPGRADES} upgrades in ${(upgradesTook / 1000).toFixed(1)} s; ${last} numbered lines; ${summary}`);

  await t.test('page: reconnected by itself after each upgrade, the same terminal, every line once', async () => {
    const states = await page.evaluate(() => window.e2eStates);
    // A close schedules attempt 1 (a retry state with lastClose); a failed
    // attempt n schedules n+1.
    const closes = states.filter((s) => s.retry && s.attempt === 1);
    assert.equal(closes.length, UPGRADES, `reconnects after a close: ${JSON.stringify(closes)}`);
    assert.ok(closes.every((s) => s.lastClose === 1012 && s.reason === 'host upgrading'), `closes: ${JSON.stringify(closes)}`);
    assert.equal(states.filter((s) => s.state === 'connected').length, UPGRADES);
    assert.deepEqual(states.filter((s) => s.restarted || s.error || s.state === 'closed'), [], 'a restart or an error');
    // While down, the page said each time that ahpd was upgrading, not an error.
    const banners = await page.evaluate(() => window.e2eBanners);
    assert.equal(banners.length, UPGRADES, `banners: ${JSON.stringify(banners)}`);
    assert.deepEqual(banners.filter((b) => b.kind !== 'upgrading' || b.code !== '1012'), [], 'a banner other than "Upgrading"');
    assert.equal(await shellPid(), pidBefore, 'the shell after the upgrades');
    const buf = await page.evaluate(() => {
      const term = window.ahpTest.term;
      const b = term.buffer.active;
      const lines = [];
      for (let y = 0; y < b.length; y++) lines.push(b.getLine(y).translateToString(true));
      return { lines, type: b.type, full: b.length >= term.options.scrollback + term.rows };
    });
    const nums = numbered(buf.lines);
    note(`page: buffer of ${buf.lines.length} lines (full: ${buf.full}), N${nums[0]}..N${nums.at(-1)}`);
    assert.equal(buf.type, 'normal');
    assertRun(nums, last, buf.full, 'the page');
    const endAt = buf.lines.indexOf(`END-${last}`);
    assert.ok(endAt > buf.lines.lastIndexOf(`N${last}`), `END-${last} after N${last}`);
    const ui = await page.evaluate(() => ({
      banner: document.querySelector('[data-testid=disconnected]').hidden,
      auth: document.querySelector('[data-testid=auth-help]')?.checkVisibility() ?? false,
      notice: document.querySelector('[data-testid=restart-notice]') != null,
      connection: window.ahpTest.state().connection,
      error: window.ahpTest.state().error,
    }));
    assert.deepEqual(ui, { banner: true, auth: false, notice: false, connection: 'connected', error: null }, 'the page at the end');
    assert.deepEqual(problems, [], 'the page logged errors');
  });

  await t.test('attach: stayed, reconnected by itself after each upgrade, every line, typing reaches the shell', async () => {
    await until('the end of the loop through attach', () => attachOut.includes(`END-${last}`), STEP_MS);
    assert.equal(attach.exitCode, null, 'ahpctl attach exited');
    assert.equal(lossesOf(attachOut), UPGRADES, 'status lines "ahpd is upgrading in place; reconnecting…"');
    // A reconnect that timed out on a very busy machine (the new binary
    // slower than attach's --timeout) says so and tries again: allowed.
    const others = countOf(attachOut, '[ahpctl: ') - UPGRADES;
    if (others > 0) note(`attach: ${others} other status lines (retried reconnects)`);
    const sessions = attachSessionsOf(attachOut);
    assert.ok(sessions.length >= UPGRADES + 1, `${sessions.length} snapshots for ${UPGRADES} reconnects`);
    let prev = 0;
    for (const [k, nums] of sessions.entries()) {
      if (nums.length === 0) continue;
      for (let j = 1; j < nums.length; j++) {
        assert.equal(nums[j], nums[j - 1] + 1, `attach session ${k}: N${nums[j]} after N${nums[j - 1]}`);
      }
      assert.ok(nums[0] <= prev + 1, `attach session ${k} starts at N${nums[0]}: N${prev + 1}..N${nums[0] - 1} never shown`);
      prev = Math.max(prev, nums.at(-1));
    }
    assert.equal(sessions.find((s) => s.length > 0)?.[0], 1, 'the first numbered line attach showed');
    assert.equal(prev, last, 'the last numbered line attach showed');
    const tail = strip(attachOut.slice(attachOut.lastIndexOf('\x1bc\x1b[3J'))).split(/\r?\n/).map((l) => l.trimEnd());
    assert.ok(tail.lastIndexOf(`END-${last}`) > tail.lastIndexOf(`N${last}`), `attach's stream ends with N${last}, END-${last}`);
    note(`attach: ${sessions.length} snapshots, N1..N${prev}`);
    // Typing into it reaches the shell: the shell's answer is on both.
    attach.stdin.write('echo via-attach-$((6*7))\r');
    await until('the answer to a line typed into attach', () => attachOut.includes('\r\nvia-attach-42\r\n'), STEP_MS);
    await waitFor(page, 'the line typed into attach in the page', () => window.ahpTest.screenText().split('\n').includes('via-attach-42'));
    assert.equal(attach.exitCode, null, 'ahpctl attach exited');
  });

  await t.test('forward: a 64 MiB transfer each way spans the upgrades, sha256 equal both ways; a new connection works', async () => {
    const done = await within(60_000, 'the transfer to finish', Promise.all([xfer.finished, far.finished])).catch((e) => e);
    note(`forward: sent ${xfer.sent} up / ${far.sent} down, received ${far.received} up / ${xfer.received} down; ` +
      `resumed ${resumes()} times; ${xferBroken() ?? 'whole'}; stderr:\n${forwardErr}`);
    // A new local connection after the last upgrade: both ways.
    const c = net.connect({ port: forwardPort, host: '127.0.0.1', allowHalfOpen: true });
    sockets.add(c);
    const got = collect(c);
    c.end('ping-after-upgrades');
    const s = await nextAccepted('a new forwarded connection at the target');
    const there = await within(STEP_MS, 'the new connection\'s bytes at the target', collect(s));
    s.end('pong-after-upgrades');
    const back = await within(STEP_MS, 'the target\'s answer through the new connection', got);
    assert.equal(there, 'ping-after-upgrades');
    assert.equal(back, 'pong-after-upgrades');
    // The transfer that spanned the upgrades.
    assert.ok(!(done instanceof Error), `the transfer: ${done?.message}; ${xferBroken() ?? ''}`);
    assert.equal(xferBroken(), null, 'the transfer broke');
    assert.equal(resumes(), UPGRADES, 'the forward resumed after each upgrade');
    // Each slice was written just before its upgrade was asked for; when
    // the new binary said it was up, part of it was still on its way in
    // most upgrades (14 to 20 of 20 in the runs so far): at least one.
    assert.ok(figures.some((f) => f.pending.up > 0 || f.pending.down > 0), 'no upgrade with bytes of the transfer on their way');
    assert.equal(countOf(forwardErr, ': ahpd is upgrading in place; resuming\n'), UPGRADES, 'forward\'s status lines for the upgrades');
    assert.deepEqual([far.received, xfer.received], [TRANSFER, TRANSFER], 'bytes received up, down');
    assert.equal(far.receivedHash(), xfer.sentHash(), 'sha256 of the bytes up');
    assert.equal(xfer.receivedHash(), far.sentHash(), 'sha256 of the bytes down');
  });

  await page.screenshot({ path: join(ARTIFACTS_DIR, 'upgrade.png') });
  finished = true;
});

// ---- helpers ------------------------------------------------------------------



// transfer wraps one end of the forwarded connection: send writes and
// hashes, what arrives is hashed and counted; finished resolves once both
// directions ended (the peer's end received, ours flushed); endedEarly
// says that the peer's end came before allSent() held.
function transfer(sock, sockets, allSent) {
  sockets.add(sock);
  const up = createHash('sha256');
  const down = createHash('sha256');
  const x = {
    sent: 0,
    received: 0,
    ended: false,
    endedEarly: false,
    error: null,
    send(b) {
      if (x.error || sock.destroyed) return;
      up.update(b);
      x.sent += b.length;
      sock.write(b);
    },
    end() {
      if (!x.error && !sock.destroyed) sock.end();
    },
    sentHash: () => up.copy().digest('hex'),
    receivedHash: () => down.copy().digest('hex'),
  };
  sock.on('data', (b) => {
    down.update(b);
    x.received += b.length;
  });
  x.finished = new Promise((res, rej) => {
    sock.on('end', () => {
      x.ended = true;
      x.endedEarly = !allSent();
    });
    sock.on('close', (hadError) => (x.ended && !hadError && !x.error ? res() : rej(new Error(x.error ?? 'closed before its end'))));
    sock.on('error', (e) => {
      x.error ??= e.message;
    });
  });
  x.finished.catch(() => {});
  return x;
}

// collect resolves with everything sock receives up to its end.
function collect(sock) {
  return new Promise((res, rej) => {
    let s = '';
    sock.setEncoding('utf8');
    sock.on('data', (d) => { s += d; });
    sock.on('end', () => res(s));
    sock.on('error', rej);
  });
}

function countOf(s, sub) {
  let n = 0;
  for (let i = s.indexOf(sub); i >= 0; i = s.indexOf(sub, i + sub.length)) n++;
  return n;
}

// lastStatus returns attach's last status line, or null.
function lastStatus(out) {
  const i = out.lastIndexOf('[ahpctl: ');
  return i < 0 ? null : out.slice(i, i + 300).split(/[\r\n]/)[0];
}

// lossesOf counts attach's status lines for a connection ended by an upgrade.
function lossesOf(out) {
  return countOf(out, '[ahpctl: ahpd is upgrading in place; reconnecting…');
}

const ESCAPES = /\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78DEHMc]/g;
const strip = (s) => s.replace(ESCAPES, '');

// numbered returns the numbers of the lines that are exactly N<number>.
function numbered(lines) {
  return lines.map((l) => /^N(\d+)$/.exec(l.trimEnd())).filter(Boolean).map((m) => Number(m[1]));
}

// attachSessionsOf cuts attach's output at each full reset (a snapshot
// follows) and returns each part's numbered lines. A part ends where
// attach's status line begins: the output line it interrupted may be cut
// short, so the last unterminated line of a part is left out.
function attachSessionsOf(out) {
  return out.split('\x1bc\x1b[3J').slice(1).map((part) => {
    const cut = part.indexOf('\r\n\x1b[0m[ahpctl:');
    let text = cut >= 0 ? part.slice(0, cut) : part;
    if (cut >= 0) text = text.slice(0, text.lastIndexOf('\n') + 1);
    return numbered(strip(text).split('\n'));
  });
}

// assertRun checks that nums is N1..Nlast, or, when the buffer is full, a
// contiguous tail ending at Nlast: each line once, in order.
function assertRun(nums, last, full, who) {
  assert.ok(nums.length > 0, `${who}: no numbered lines`);
  for (let j = 1; j < nums.length; j++) assert.equal(nums[j], nums[j - 1] + 1, `${who}: N${nums[j]} after N${nums[j - 1]}`);
  assert.equal(nums.at(-1), last, `${who}: the last numbered line`);
  if (!full) assert.equal(nums[0], 1, `${who}: the first numbered line (the scrollback is not full)`);
}

function summarize(figures) {
  const stat = (k) => {
    const v = figures.map((f) => f[k]).filter((x) => x != null).sort((a, b) => a - b);
    return v.length ? `${v[0]}/${v[Math.floor(v.length / 2)]}/${v.at(-1)} ms` : '–';
  };
  return `request → logged ${stat('upgraded')}, → page back ${stat('pageBack')}, → attach back ${stat('attachBack')}, ` +
    `→ forward resumed ${stat('forwardBack')} (min/median/max)`;
}
