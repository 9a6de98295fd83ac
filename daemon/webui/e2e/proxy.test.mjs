// proxy.test.mjs — ahpd behind a real nginx (Debian's package), with the
// example configuration of docs/nginx-ahpd.conf, at /ahpd/ and at /
// (issue 39). For each prefix:
//   - ahpd runs with --public-url http://127.0.0.1:PORT/PREFIX and prints
//     its link under it;
//   - the page, opened from that link in headless Chromium, connects
//     through nginx and shows the shell (echo through it);
//   - `ahpctl attach --url http://127.0.0.1:PORT/PREFIX` (under a pty)
//     reaches the shell, and `ahpctl forward --url …` carries a TCP
//     connection to an echo server;
// and at /ahpd/ the page opened through a second port of nginx, an
// Origin ahpd does not allow, says so and names allowedOrigins, stops
// retrying (one WebSocket attempt), instead of "reconnecting (1006)".
//
// nginx runs as its own instance: -p and -c in a temporary directory,
// `daemon off;`, its pid and logs there, listening on free loopback ports;
// it is killed at the end. Without /usr/sbin/nginx the test is skipped
// (apt-get install nginx), and fails when CI=true.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AHPCTL_BIN, AHPD_BIN, ARTIFACTS_DIR, CHROMIUM_ARGS, CHROMIUM_BIN, CI, printedLink, run, STEP_MS, until, waitAttached, waitFor } from './common.mjs';

const NGINX_BIN = process.env.NGINX_BIN || '/usr/sbin/nginx';
const SCRIPT_BIN = '/usr/bin/script'; // util-linux (bsdutils): attach needs a terminal
const EXAMPLE = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../../docs/nginx-ahpd.conf');
const CHANNEL = 'ahp-terminal:/shell';
const PROMPT = 'e2e$ ';
const LAUNCH_MS = 30_000;
const ARTIFACTS = ['proxy-ahpd.png', 'proxy-root.png', 'proxy-refused.png', 'proxy-failure.png', 'proxy-e2e.log', 'proxy-daemon.log', 'proxy-nginx.log'];

const missing = !existsSync(NGINX_BIN) ? `no nginx at ${NGINX_BIN} (apt-get install nginx)`
  : !existsSync(CHROMIUM_BIN) ? `no browser at ${CHROMIUM_BIN} (apt-get install chromium)`
    : !existsSync(AHPD_BIN) ? `no daemon at ${AHPD_BIN} (make build)`
      : !existsSync(AHPCTL_BIN) ? `no ahpctl at ${AHPCTL_BIN} (make build)`
        : !existsSync(SCRIPT_BIN) ? `no ${SCRIPT_BIN} (apt-get install bsdutils)` : null;
if (missing && CI) throw new Error(`e2e proxy: ${missing}`);

test('proxy: the page, ahpctl attach --url and ahpctl forward --url through nginx at /ahpd/ and at /', {
  skip: missing ?? false,
  timeout: 150_000,
}, async (t) => {
  const { chromium } = await import('playwright-core');
  await mkdir(ARTIFACTS_DIR, { recursive: true });
  for (const f of ARTIFACTS) await rm(join(ARTIFACTS_DIR, f), { force: true });
  const tmp = await mkdtemp(join(tmpdir(), 'ahpd-e2e-proxy-'));
  const t0 = Date.now();
  const log = [];
  const note = (line) => log.push(`${new Date().toISOString()} +${((Date.now() - t0) / 1000).toFixed(1)}s ${line}`);
  const procs = new Set(); // spawned processes, killed at the end
  const sockets = new Set();
  const daemonOut = [];
  let browser = null;
  let page = null;
  let echo = null;
  let passed = false;

  t.after(async () => {
    if (!passed && page && !page.isClosed()) {
      await page.screenshot({ path: join(ARTIFACTS_DIR, 'proxy-failure.png'), timeout: 3000 }).catch(() => {});
    }
    await browser?.close().catch(() => {});
    for (const p of procs) {
      if (p.exitCode === null && p.signalCode === null) {
        try { process.kill(p.detached ? -p.pid : p.pid, 'SIGKILL'); } catch { /* gone */ }
      }
    }
    for (const s of sockets) s.destroy();
    echo?.close();
    let nginxLog = '';
    for (const dir of ['ahpd', 'root']) {
      nginxLog += await readFile(join(tmp, dir, 'error.log'), 'utf8').catch(() => '');
      nginxLog += await readFile(join(tmp, dir, 'access.log'), 'utf8').catch(() => '');
    }
    await writeFile(join(ARTIFACTS_DIR, 'proxy-nginx.log'), nginxLog).catch(() => {});
    await writeFile(join(ARTIFACTS_DIR, 'proxy-daemon.log'), daemonOut.map((o) => o.join('')).join('\n----\n')).catch(() => {});
    await writeFile(join(ARTIFACTS_DIR, 'proxy-e2e.log'), log.join('\n') + '\n').catch(() => {});
    await rm(tmp, { recursive: true, force: true });
  });

  // The example's blocks, as the documentation has them.
  const example = await readFile(EXAMPLE, 'utf8');
  const block = (name) => {
    const m = new RegExp(`# BEGIN ${name}\\n([^]*?)\\n\\s*# END ${name}`).exec(example);
    assert.ok(m, `docs/nginx-ahpd.conf has no "${name}" block`);
    return m[1];
  };
  const mapBlock = block('ahpd map');
  const locationBlock = block('ahpd location');
  assert.match(locationBlock, /location \/ahpd\/ \{/);
  assert.match(locationBlock, /proxy_pass http:\/\/127\.0\.0\.1:7681;/);

  // A TCP echo server, the target of ahpctl forward.
  echo = net.createServer((s) => {
    sockets.add(s);
    // A forward that ends its channel before tcp/closed resets the
    // target's connection (PROTOCOL.md §8): an error here is that reset,
    // not the test's failure (unhandled, it threw ECONNRESET once).
    s.on('error', () => {});
    s.pipe(s);
  });
  await new Promise((res, rej) => echo.listen(0, '127.0.0.1', res).on('error', rej));
  const echoPort = echo.address().port;

  browser = await chromium.launch({ executablePath: CHROMIUM_BIN, args: CHROMIUM_ARGS, timeout: LAUNCH_MS });
  const context = await browser.newContext({ viewport: { width: 1000, height: 600 }, deviceScaleFactor: 1 });
  context.setDefaultTimeout(STEP_MS);
  const problems = [];

  for (const prefix of ['/ahpd/', '/']) {
    const name = prefix === '/' ? 'root' : 'ahpd';
    note(`---- prefix ${prefix}`);
    const dir = join(tmp, name);
    const home = join(dir, 'home');
    const stateDir = join(dir, 'state');
    const controlSock = join(dir, 'control.sock');
    await mkdir(home, { recursive: true });
    const shrc = join(home, 'shrc');
    await writeFile(shrc, `PS1='${PROMPT}'\n`);
    const ctl = (...args) => run(AHPCTL_BIN, ['--control', controlSock, ...args], {});
    const port = await freePort();
    const otherPort = await freePort(); // an Origin ahpd does not know
    const publicUrl = `http://127.0.0.1:${port}${prefix}`;

    // ---- ahpd, on loopback, with the public URL --------------------------------
    const daemon = spawn(AHPD_BIN, ['--listen', '127.0.0.1:0', '--public-url', publicUrl, '--state-dir', stateDir,
      '--control', controlSock, '--config', 'none', '--print-link'], {
      cwd: home,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: home, SHELL: '/bin/sh', ENV: shrc, PS1: PROMPT, LANG: 'C.UTF-8', TZ: 'UTC' },
    });
    procs.add(daemon);
    const out = [];
    const exited = new Promise((res) => daemon.on('exit', (code, signal) => res({ code, signal })));
    daemon.stdout.setEncoding('utf8').on('data', (s) => out.push(s));
    daemonOut.push(out); // printedLink goes on appending what the daemon writes
    const link = await printedLink(daemon, out, exited);
    note(`link ${link.replace(/ticket=[^&]+/, 'ticket=…')}`);
    assert.ok(link.startsWith(`${publicUrl}#ticket=`), `the printed link is under publicUrl: ${link}`);
    const addr = /msg=listening addr=(\S+)/.exec(out.join(''))?.[1];
    assert.ok(addr, `the daemon's address in its log:\n${out.join('')}`);

    // ---- nginx, with the example's blocks ---------------------------------------
    const location = locationBlock
      .replace('location /ahpd/ {', `location ${prefix} {`)
      .replace('proxy_pass http://127.0.0.1:7681;', `proxy_pass http://${addr};`);
    const conf = [
      'daemon off;',
      process.getuid?.() === 0 ? 'user root;' : '', // workers write the temp directories below
      'worker_processes 1;',
      `pid ${join(dir, 'nginx.pid')};`,
      `error_log ${join(dir, 'error.log')} info;`,
      'events { worker_connections 256; }',
      'http {',
      `  access_log ${join(dir, 'access.log')};`,
      ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((k) => `  ${k}_temp_path ${join(dir, k)};`),
      mapBlock,
      '  server {',
      `    listen 127.0.0.1:${port};`,
      `    listen 127.0.0.1:${otherPort};`,
      location,
      '  }',
      '}',
      '',
    ].join('\n');
    await writeFile(join(dir, 'nginx.conf'), conf);
    // Its own process group: a failed test's cleanup kills the group, so
    // that no worker outlives its master (a SIGKILLed master leaves them).
    const nginx = spawn(NGINX_BIN, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    procs.add(nginx);
    let nginxErr = '';
    nginx.stderr.setEncoding('utf8').on('data', (s) => { nginxErr += s; });
    nginx.on('exit', (code, signal) => note(`nginx (${prefix}) exited code=${code} signal=${signal}`));
    await until(`nginx to answer on ${port}`, async () => {
      if (nginx.exitCode !== null) throw new Error(`nginx exited ${nginx.exitCode}: ${nginxErr}`);
      const r = await fetch(`${publicUrl}healthz`).catch(() => null);
      return r?.status === 200 && (await r.text()) === 'ok\n';
    }, STEP_MS);
    note(`nginx on ${port} → ahpd ${addr}`);

    // ---- the page -----------------------------------------------------------------
    page = await context.newPage();
    page.on('pageerror', (e) => problems.push(`${name}: uncaught ${e.message}`));
    page.on('console', (m) => {
      note(`${name} console.${m.type()}: ${m.text()}`);
      if (m.type() === 'error') problems.push(`${name}: console error: ${m.text()}`);
    });
    const started = Date.now();
    await page.goto(link.replace(`${prefix}#`, `${prefix}?renderer=dom#`));
    await waitAttached(page);
    note(`page attached through nginx in ${Date.now() - started} ms`);
    assert.ok(new URL(page.url()).pathname === prefix, `the page stays under ${prefix}: ${page.url()}`);
    await page.getByTestId('terminal').click();
    await page.keyboard.type('echo proxied-$((6*7))', { delay: 5 });
    await page.keyboard.press('Enter');
    await waitFor(page, 'the shell to answer through nginx', () => window.ahpTest.screenText().split('\n').includes('proxied-42'));
    await page.screenshot({ path: join(ARTIFACTS_DIR, `proxy-${name}.png`) });
    await page.close();

    // ahpctl open's link and status name the public URL too.
    const opened = (await ctl('open', CHANNEL)).trim();
    assert.ok(opened.startsWith(`${publicUrl}#ticket=`), `ahpctl open printed ${opened}`);
    const status = await ctl('status');
    assert.ok(status.includes(publicUrl), `ahpctl status does not name ${publicUrl}:\n${status}`);

    // ---- ahpctl attach --url, under a pty --------------------------------------
    const tok = (await ctl('token', 'create', '--role', 'control', '--channel', CHANNEL)).trim();
    const tokFile = join(dir, 'attach.token');
    await writeFile(tokFile, tok + '\n', { mode: 0o600 });
    const attach = spawn(SCRIPT_BIN, ['-qfec', `exec '${AHPCTL_BIN}' --control '${join(dir, 'none.sock')}' attach --url '${publicUrl}' --token-file '${tokFile}' ${CHANNEL}`, '/dev/null'], {
      stdio: ['pipe', 'pipe', 'pipe'], detached: true, env: { ...process.env, AHP_URL: '', AHP_TOKEN: '', TERM: 'xterm' },
    });
    procs.add(attach);
    let attachOut = '';
    attach.stdout.setEncoding('utf8').on('data', (s) => { attachOut += s; });
    attach.stderr.setEncoding('utf8').on('data', (s) => { attachOut += s; });
    await until(() => `ahpctl attach --url ${publicUrl} to attach; it wrote: ${JSON.stringify(attachOut.slice(-500))}`,
      () => attachOut.includes(`attached to ${CHANNEL}`), STEP_MS);
    attach.stdin.write("echo att''ach-$((7*6))\r");
    await until(() => `the shell's answer through attach; it wrote: ${JSON.stringify(attachOut.slice(-500))}`,
      () => attachOut.includes('attach-42'), STEP_MS);
    note('attach --url through nginx: the shell answered');
    try { process.kill(-attach.pid, 'SIGKILL'); } catch { /* gone */ }

    // ---- ahpctl forward --url ---------------------------------------------------------
    await ctl('tcp', 'allow', `127.0.0.1:${echoPort}`);
    const ftok = (await ctl('token', 'create', '--role', 'control')).trim();
    const ftokFile = join(dir, 'forward.token');
    await writeFile(ftokFile, ftok + '\n', { mode: 0o600 });
    const forward = spawn(AHPCTL_BIN, ['--control', join(dir, 'none.sock'), 'forward', '--url', publicUrl, '--token-file', ftokFile,
      '127.0.0.1:0', `127.0.0.1:${echoPort}`], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, AHP_URL: '', AHP_TOKEN: '' } });
    procs.add(forward);
    let forwardErr = '';
    forward.stderr.setEncoding('utf8').on('data', (s) => { forwardErr += s; });
    await until(() => `ahpctl forward --url to listen; it wrote: ${forwardErr}`, () => /listening on 127\.0\.0\.1:\d+/.test(forwardErr), STEP_MS);
    const fport = Number(/listening on 127\.0\.0\.1:(\d+)/.exec(forwardErr)[1]);
    const sock = net.connect({ port: fport, host: '127.0.0.1' });
    sockets.add(sock);
    let got = '';
    sock.setEncoding('utf8').on('data', (d) => { got += d; });
    const line = `through-nginx-${name}\n`;
    sock.write(line);
    await until(() => `the echo through forward; got ${JSON.stringify(got)}; forward wrote: ${forwardErr}`, () => got === line, STEP_MS);
    sock.destroy();
    note('forward --url through nginx: echoed');
    forward.kill('SIGINT');

    // ---- a refused Origin: the page says why and stops ------------------------------
    if (prefix === '/ahpd/') {
      const admin = (await readFile(join(stateDir, 'admin.token'), 'utf8')).trim();
      page = await context.newPage();
      const sockets = [];
      page.on('websocket', (ws) => sockets.push(ws.url()));
      page.on('console', (m) => note(`refused console.${m.type()}: ${m.text()}`));
      page.on('pageerror', (e) => problems.push(`refused: uncaught ${e.message}`));
      const other = `http://127.0.0.1:${otherPort}${prefix}`;
      const t1 = Date.now();
      await page.goto(`${other}?renderer=dom#token=${encodeURIComponent(admin)}&channel=${CHANNEL}`);
      await waitFor(page, 'the refusal to be shown', () => {
        const n = document.querySelector('[data-testid=refused]');
        return n && !n.hidden && window.ahpTest.state().error === 'refused';
      });
      note(`refusal shown ${Date.now() - t1} ms after the page was opened`);
      const notice = await page.getByTestId('refused').textContent();
      note(`notice: ${notice}`);
      assert.match(notice, /Origin http:\/\/127\.0\.0\.1:\d+ is not allowed/);
      assert.ok(notice.includes('allowedOrigins') && notice.includes(`"127.0.0.1:${otherPort}"`), notice);
      assert.ok(notice.includes('HTTP 403'), notice);
      assert.equal(await page.getByTestId('status-connection').textContent(), 'closed (403: origin not allowed (allowedOrigins))');
      // No retry: the one attempt stays the only one.
      await new Promise((r) => setTimeout(r, 3000));
      assert.equal(sockets.length, 1, `WebSocket attempts after a refusal: ${JSON.stringify(sockets)}`);
      assert.equal(sockets[0], `ws://127.0.0.1:${otherPort}${prefix}v1/ws`);
      await page.screenshot({ path: join(ARTIFACTS_DIR, 'proxy-refused.png') });
      await page.close();
    }
    page = null;

    daemon.kill('SIGTERM');
    nginx.kill('SIGQUIT');
    await exited;
  }
  assert.deepEqual(problems.filter((p) => !/v1\/ws.*403|WebSocket connection to .* failed/.test(p)), []);
  passed = true;
});

// freePort returns a loopback port that was free a moment ago.
async function freePort() {
  const s = net.createServer();
  await new Promise((res, rej) => s.listen(0, '127.0.0.1', res).on('error', rej));
  const { port } = s.address();
  await new Promise((res) => s.close(res));
  return port;
}


