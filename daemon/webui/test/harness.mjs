// harness.mjs — a fake WebSocket and a scripted host for the session.js tests.
import { Session } from '../src/session.js';

export const CHANNEL = 'ahp-terminal:/t1';

/** FakeSocket records what the client sends; the test plays the host. */
export class FakeSocket {
  static instances = [];
  constructor(url, protocol) {
    this.url = url;
    this.protocol = protocol;
    this.sent = [];
    this.closed = null;
    FakeSocket.instances.push(this);
  }
  send(text) {
    if (this.closed) throw new Error('send on closed socket');
    this.sent.push(text);
  }
  close(code = 1005, reason = '') {
    if (this.closed) return;
    this.closed = { code, reason };
    this.onclose?.({ code, reason });
  }
  // ---- host side ----
  open() {
    this.onopen?.();
  }
  /** recv delivers one host message (an object or raw text). */
  recv(msg) {
    this.onmessage?.({ data: typeof msg === 'string' ? msg : JSON.stringify(msg) });
  }
  hostClose(code, reason = '') {
    this.closed = { code, reason };
    this.onclose?.({ code, reason });
  }
  /** take returns and forgets the parsed messages the client sent. */
  take() {
    const out = this.sent.map((t) => JSON.parse(t));
    this.sent.length = 0;
    return out;
  }
  /** takeRaw returns and forgets the raw texts the client sent. */
  takeRaw() {
    const out = this.sent.slice();
    this.sent.length = 0;
    return out;
  }
}

export function initResult(extra = {}) {
  return {
    protocolVersion: 'ahp/1',
    server: { name: 'ahpd', version: 'test' },
    capabilities: {
      flowControl: {
        hostReceiveDefaults: { windowBytes: 65536, maximumFrameBytes: 16384, maximumMessageBytes: 65536 },
        maximums: { windowBytes: 1 << 24, maximumFrameBytes: 1 << 20, maximumMessageBytes: 1 << 24 },
      },
    },
    limits: { maxIdLength: 1024, maxInboundMessageBytes: 1 << 20, maxSubscriptions: 1024 },
    access: { role: 'control' },
    ...extra,
  };
}

/** connect returns an initialized Session over a FakeSocket. */
export async function connect({ role = 'control', token = 'tok' } = {}) {
  const p = Session.connect({ url: 'ws://h/v1/ws', WebSocket: FakeSocket, token });
  const ws = FakeSocket.instances[FakeSocket.instances.length - 1];
  ws.open();
  const [init] = ws.take();
  ws.recv({ jsonrpc: '2.0', id: init.id, result: initResult({ access: { role } }) });
  const session = await p;
  return { session, ws, init };
}

/**
 * subscribe subscribes CHANNEL and answers as the host, granting the
 * requested receive limits unchanged and hostReceive as given.
 */
export async function subscribe(ctx, { receive, hostReceive, consumer, id = 's1', channel = CHANNEL, options = {} } = {}) {
  const { session, ws } = ctx;
  const p = session.subscribe(channel, consumer ?? collector(), { receive, ...options });
  const [req] = ws.take();
  ws.recv({
    jsonrpc: '2.0',
    id: req.id,
    result: {
      subscriptionId: id,
      flowControl: {
        clientReceive: req.params.flowControl.receive,
        hostReceive: hostReceive ?? { windowBytes: 65536, maximumFrameBytes: 16384, maximumMessageBytes: 65536 },
      },
      initial: { kind: 'snapshot' },
    },
  });
  const sub = await p;
  return { sub, req };
}

/**
 * collector is a consumer that records messages and keeps their release
 * functions for the test to call (or releases at once when auto is set).
 */
export function collector({ auto = false } = {}) {
  const c = {
    messages: [],
    releases: [],
    ends: [],
    onMessage(m, release) {
      c.messages.push(m);
      c.releases.push(release);
      if (auto) release();
    },
    onEnd(info) {
      c.ends.push(info);
    },
  };
  return c;
}

/** logical returns the serialized logical message text for method+params. */
export function logical(method, params) {
  return JSON.stringify({ jsonrpc: '2.0', method, params });
}

/** frame returns a channel/frame host message. */
export function frame(messageId, data, final, { subscriptionId = 's1', channel = CHANNEL } = {}) {
  const params = { channel, subscriptionId, messageId, data };
  if (final) params.final = true;
  return { jsonrpc: '2.0', method: 'channel/frame', params };
}

/** sendMessage plays the host: sends text cut at the given positions. */
export function sendMessage(ws, messageId, text, cuts = [], opts = {}) {
  const points = [0, ...cuts, text.length];
  for (let i = 0; i + 1 < points.length; i++) {
    ws.recv(frame(messageId, text.slice(points[i], points[i + 1]), i + 2 === points.length, opts));
  }
}

/** resets returns the channel/reset notifications among msgs. */
export const resets = (msgs) => msgs.filter((m) => m.method === 'channel/reset');
export const credits = (msgs) => msgs.filter((m) => m.method === 'channel/credit');

/** rng is a small deterministic PRNG (mulberry32) for property tests. */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * FakeClock runs timers in time order when advanced; nothing runs by itself.
 * Its now, setTimeout and clearTimeout are bound, to hand to code under test.
 */
export class FakeClock {
  timers = new Map();
  next = 1;
  constructor(start = 0) {
    this.t = start;
  }
  now = () => this.t;
  setTimeout = (fn, ms) => {
    const id = this.next++;
    this.timers.set(id, { at: this.t + ms, fn });
    return id;
  };
  clearTimeout = (id) => {
    this.timers.delete(id);
  };
  /** advance moves time forward by ms, running due timers in order (bounded). */
  advance(ms) {
    const end = this.t + ms;
    for (let i = 0; i < 10000; i++) {
      let first = null;
      for (const [id, tm] of this.timers) if (tm.at <= end && (!first || tm.at < first[1].at)) first = [id, tm];
      if (!first) break;
      this.timers.delete(first[0]);
      this.t = first[1].at;
      first[1].fn();
    }
    this.t = end;
  }
}
