// common.mjs — what the browser tests share: where the binaries and
// artifacts are, Chromium's flags, and bounded waits. Not a test file.
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
const repoRoot = resolve(here, '../../..');

export const AHPD_BIN = resolve(process.env.AHPD_BIN || join(repoRoot, 'bin/ahpd'));
export const AHPCTL_BIN = resolve(process.env.AHPCTL_BIN || join(AHPD_BIN, '../ahpctl'));
export const CHROMIUM_BIN = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
export const ARTIFACTS_DIR = resolve(process.env.ARTIFACTS_DIR || join(here, 'artifacts'));
export const CI = process.env.CI === 'true';
export const STEP_MS = 10_000; // bound of every single wait
export const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--disable-dev-shm-usage',
];

/** within rejects if promise has not settled after ms. */
export async function within(ms, what, promise) {
  let timer;
  const timeout = new Promise((_, rej) => {
    timer = setTimeout(() => rej(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** waitFor waits (bounded) until fn(arg) holds in the page; the error carries the page's state. */
export async function waitFor(page, what, fn, arg, timeout = STEP_MS) {
  try {
    await page.waitForFunction(fn, arg, { timeout, polling: 50 });
  } catch (e) {
    const state = await page.evaluate(() => window.ahpTest?.state()).catch(() => null);
    throw new Error(`waiting for ${what}: ${e.message.split('\n')[0]}\npage state: ${JSON.stringify(state)}`);
  }
}

/** run runs a command with a bounded wait (ms) and resolves with its stdout. */
export function run(bin, args, env, ms = STEP_MS) {
  return new Promise((res, rej) => {
    const p = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let out = '';
    let err = '';
    p.stdout.setEncoding('utf8').on('data', (d) => { out += d; });
    p.stderr.setEncoding('utf8').on('data', (d) => { err += d; });
    const timer = setTimeout(() => p.kill('SIGKILL'), ms);
    p.on('error', rej);
    p.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) res(out);
      else rej(new Error(`${bin} ${args.join(' ')}: exit ${code ?? signal}\n${err}`));
    });
  });
}

/**
 * scratch clears this run's artifacts (a stale screenshot never passes for
 * a new one) and makes a temporary directory tmp (named prefix…) with an
 * empty home in it; the test removes tmp when done.
 */
export async function scratch(prefix, artifacts) {
  await mkdir(ARTIFACTS_DIR, { recursive: true });
  for (const f of artifacts) await rm(join(ARTIFACTS_DIR, f), { force: true });
  const tmp = await mkdtemp(join(tmpdir(), prefix));
  const home = join(tmp, 'home');
  await mkdir(home, { recursive: true });
  return { tmp, home };
}

/**
 * startDaemon spawns bin/ahpd with args in home (HOME too, a plain /bin/sh
 * environment), its stdout and stderr kept in out. It returns the process
 * at once, for the caller's cleanup to kill, and link, the promise of the
 * link it prints (pass --print-link).
 */
export function startDaemon(home, args, out) {
  const daemon = spawn(AHPD_BIN, args, {
    cwd: home,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: home, SHELL: '/bin/sh', LANG: 'C.UTF-8', TZ: 'UTC' },
  });
  daemon.stdout.setEncoding('utf8').on('data', (s) => out.push(s));
  const exited = new Promise((res) => daemon.on('exit', (code, signal) => res({ code, signal })));
  return { daemon, link: printedLink(daemon, out, exited) };
}

/**
 * printedLink resolves with the browser link a daemon started with
 * --print-link writes on stderr (everything it writes goes to out too);
 * it rejects if exited (a promise of {code, signal}) settles first.
 */
export function printedLink(daemon, out, exited) {
  daemon.stderr.setEncoding('utf8');
  return within(STEP_MS, 'the daemon to print its URL', new Promise((res, rej) => {
    let buf = '';
    daemon.stderr.on('data', (s) => {
      out.push(s);
      buf += s;
      // http://127.0.0.1:PORT/#ticket=…, or under a publicUrl (proxy.test.mjs).
      const m = /Open (https?:\/\/[^\s#]+\/#ticket=[^\s&]+&channel=\S+)/.exec(buf);
      if (m) res(m[1]);
    });
    exited.then((e) => rej(new Error(`daemon exited (${e.code ?? e.signal}) before printing a URL:\n${buf}`)));
  }));
}

// until polls fn every 20 ms until it returns truthy (which it returns),
// and throws after ms; fn may throw to give up at once. what may be a
// function, called for the message.
export async function until(what, fn, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${typeof what === 'function' ? what() : what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// waitAttached waits until the page is connected and its subscription has
// applied channel/ready.
export async function waitAttached(page) {
  await waitFor(page, 'the page to connect and attach', () => {
    const s = window.ahpTest?.state();
    return s && s.connection === 'connected' && s.ready && s.subscriptionId != null;
  });
}
