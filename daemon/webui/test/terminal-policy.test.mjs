// Where keystrokes go and when the page asks for its size (terminal-policy.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EARLY_INPUT_MAX, InputGate, pickRenderer, ResizePolicy } from '../src/terminal-policy.js';

const fakeSub = () => ({ sent: [], sendInput(d) { this.sent.push(d); return true; } });

test('keys typed while the page attaches are sent once the subscription is live', () => {
  const g = new InputGate();
  g.attaching(); // the page starts attaching at load
  assert.equal(g.input('ec'), 'kept');
  g.setRole('control'); // initialize answered
  g.attaching(); // the channel is known now: what was kept stays
  assert.equal(g.input('ho hi\r'), 'kept');
  const sub = fakeSub();
  g.subscribed(sub);
  assert.deepEqual(sub.sent, ['echo hi\r']);
  assert.equal(g.input('x'), 'sent');
  assert.deepEqual(sub.sent, ['echo hi\r', 'x']);
});

test('keys kept while attaching are bounded; a failed attach forgets them', () => {
  const g = new InputGate(8);
  g.setRole('control');
  g.attaching();
  assert.equal(g.input('12345678'), 'kept');
  assert.equal(g.input('9'), 'dropped');
  assert.equal(g.dropped, 1);
  g.cancel();
  const sub = fakeSub();
  g.subscribed(sub);
  assert.deepEqual(sub.sent, []);
  assert.equal(EARLY_INPUT_MAX, 4096);
});

test('keys typed while reconnecting are not kept (input is never retried blindly)', () => {
  const g = new InputGate();
  g.setRole('control');
  g.attaching();
  const s1 = fakeSub();
  g.subscribed(s1);
  g.ended(s1); // the connection dropped
  assert.equal(g.input('ls\r'), 'dropped');
  const s2 = fakeSub();
  g.subscribed(s2); // the reconnect's subscription
  assert.deepEqual(s2.sent, []);
});

test('view role: nothing is sent or kept, and the page is told', () => {
  const g = new InputGate();
  g.attaching();
  g.input('a');
  g.setRole('view');
  const sub = fakeSub();
  g.subscribed(sub);
  assert.equal(g.input('b'), 'view-only');
  assert.deepEqual(sub.sent, []);
});

test('after the program exited, a key sends nothing (no channel-closed reset)', () => {
  const g = new InputGate();
  g.setRole('control');
  const sub = fakeSub();
  g.subscribed(sub);
  g.exit();
  assert.equal(g.input('x'), 'exited');
  assert.deepEqual(sub.sent, []);
  g.attaching(); // another channel picked: typing works again
  g.subscribed(fakeSub());
  assert.equal(g.input('x'), 'sent');
});

function policy(fit) {
  const requests = [];
  const clipped = [];
  const p = new ResizePolicy({
    measure: () => fit.current,
    request: (rows, cols) => requests.push(`${rows}x${cols}`),
    onClipped: (c) => clipped.push(c),
  });
  return { p, requests, clipped };
}

test('resize: the page reports its size once subscribed, and asks again only when its window changes or the badge is clicked', () => {
  const fit = { current: { rows: 40, cols: 120 } };
  const { p, requests, clipped } = policy(fit);
  p.viewport(); // ResizeObserver's first call: nothing to ask yet
  p.attaching();
  p.hostSize(40, 120); // the snapshot: the terminal has this page's size already
  assert.deepEqual(requests, []);
  p.readied(true);
  assert.deepEqual(requests, ['40x120'], 'the report goes out even when the size is the same: the host needs it');
  // Another tab is used and its size applies: shown, not fought.
  p.hostSize(30, 90);
  p.viewport(); // nothing changed here
  assert.deepEqual(requests, ['40x120'], 'a tab that did not change does not snap the size back');
  assert.equal(p.clipped, null);
  // Another tab's bigger size applies: this one is clipped, and says so.
  p.hostSize(50, 150);
  assert.deepEqual(p.clipped, { rows: 50, cols: 150, fitRows: 40, fitCols: 120 });
  assert.deepEqual(clipped.at(-1), p.clipped);
  assert.deepEqual(requests, ['40x120']);
  // This page's window changes: an explicit resize, which the host applies.
  fit.current = { rows: 42, cols: 130 };
  p.viewport();
  assert.deepEqual(requests, ['40x120', '42x130']);
  p.hostSize(42, 130);
  assert.equal(p.clipped, null);
  assert.equal(clipped.at(-1), null);
  // The clipped badge's action asks for this viewport's size at once, even
  // the size this page told last.
  p.hostSize(50, 150);
  assert.equal(p.fit(), true);
  assert.deepEqual(requests, ['40x120', '42x130', '42x130']);
});

test('resize: every subscription reports once, a reconnect included; view role never asks', () => {
  const fit = { current: { rows: 40, cols: 120 } };
  const { p, requests } = policy(fit);
  p.viewport();
  p.attaching();
  p.hostSize(24, 80);
  p.readied(true);
  p.hostSize(40, 120);
  p.ended(); // connection lost
  p.hostSize(30, 90); // the reconnect's snapshot: another viewer's size applies
  p.readied(true);
  assert.deepEqual(requests, ['40x120', '40x120'], 'the new subscription reports (the host does not apply it while another decides)');
  p.ended();
  fit.current = { rows: 35, cols: 100 };
  p.viewport(); // the window changed while down: the next report carries it
  assert.deepEqual(requests, ['40x120', '40x120']);
  p.readied(true);
  assert.deepEqual(requests, ['40x120', '40x120', '35x100']);

  const v = policy({ current: { rows: 40, cols: 120 } });
  v.p.viewport();
  v.p.attaching();
  v.p.hostSize(24, 80);
  v.p.readied(false); // view role
  assert.deepEqual(v.requests, []);
  assert.equal(v.p.fit(), false);
  v.p.viewport();
  assert.deepEqual(v.requests, []);
});

test('renderer: WebGL on a GPU, the DOM renderer on a software rasterizer unless ?renderer=webgl', () => {
  const gpu = { name: 'ANGLE (Intel, Mesa Intel(R) UHD Graphics 620 (KBL GT2), OpenGL 4.6)' };
  const swiftshader = { name: 'ANGLE (Google, Vulkan 1.3.0 (SwiftShader Device (Subzero) (0x0000C0DE)), SwiftShader driver)' };
  const llvmpipe = { name: 'llvmpipe (LLVM 15.0.6, 256 bits)' };
  assert.equal(pickRenderer('auto', gpu), 'webgl');
  assert.equal(pickRenderer('auto', { name: '' }), 'webgl', 'a hidden name is taken for a GPU');
  assert.equal(pickRenderer('auto', swiftshader), 'dom');
  assert.equal(pickRenderer('auto', llvmpipe), 'dom');
  assert.equal(pickRenderer(undefined, swiftshader), 'dom');
  assert.equal(pickRenderer('webgl', swiftshader), 'webgl');
  assert.equal(pickRenderer('webgl', null), 'dom', 'no WebGL 2 context');
  assert.equal(pickRenderer('auto', null), 'dom');
  assert.equal(pickRenderer('dom', gpu), 'dom');
});

test('resize: a fit that moves once its size applies (xterm\'s rounded cell width) is asked for once more, not again', () => {
  const fit = { current: { rows: 40, cols: 120 } };
  const { p, requests } = policy(fit);
  p.viewport();
  p.attaching();
  p.hostSize(24, 80);
  p.readied(true);
  p.hostSize(40, 120); // applied; measured again: the same
  assert.deepEqual(requests, ['40x120']);
  // The window grows: measured at 120 columns it fits 114; at 114, 115.
  fit.current = { rows: 42, cols: 114 };
  p.viewport();
  assert.deepEqual(requests, ['40x120', '42x114']);
  fit.current = { rows: 42, cols: 115 };
  p.hostSize(42, 114);
  assert.deepEqual(requests, ['40x120', '42x114', '42x115'], 'settled: the size that fits at the size it fits');
  // At 115 it would measure 114 again: not asked (no alternating).
  fit.current = { rows: 42, cols: 114 };
  p.hostSize(42, 115);
  assert.deepEqual(requests, ['40x120', '42x114', '42x115']);
  // Another viewer's size is never measured against (not this page's request).
  fit.current = { rows: 42, cols: 130 };
  p.viewport();
  assert.deepEqual(requests, ['40x120', '42x114', '42x115', '42x130']);
  fit.current = { rows: 42, cols: 131 };
  p.hostSize(30, 90); // another tab's size applied first
  p.hostSize(42, 130); // then ours again, from that tab's view of it: not this request's
  assert.deepEqual(requests, ['40x120', '42x114', '42x115', '42x130'], 'the settle ends with the first size the host applies');
  // A view-only page never settles either.
  const v = policy({ current: { rows: 40, cols: 120 } });
  v.p.attaching();
  v.p.readied(false);
  v.p.hostSize(24, 80);
  assert.deepEqual(v.requests, []);
});
