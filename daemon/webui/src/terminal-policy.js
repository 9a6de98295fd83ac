// terminal-policy.js — what the terminal view (terminal.js) sends and when,
// without xterm or the DOM, so node tests drive it:
//   InputGate     where a keystroke goes: the live subscription (control
//                 role), a bounded buffer while the page attaches (keys
//                 typed right after load or after picking a channel), or
//                 nowhere (view role: the page says so; after the program
//                 exited; while reconnecting, since input is never retried
//                 blindly, PROTOCOL.md §8);
//   ResizePolicy  when the page tells the host its size: once each
//                 subscription is ready (a report: the host applies it only
//                 if no viewer decides the size yet), when its own viewport
//                 changes and when the clipped badge is clicked (explicit:
//                 the host gives this page the size) — never because another
//                 viewer's size applied (the most recently active control
//                 viewer's size decides, docs/protocol-decisions.md) — and
//                 whether the host's size is clipped by the viewport.

import { clippedBy } from './prefs.js';

/**
 * SOFTWARE_GL matches the WebGL renderer names of rasterizers that draw on
 * the CPU (Chromium's SwiftShader, Mesa's llvmpipe and softpipe, Windows'
 * Basic Render Driver): there xterm's WebGL renderer costs more than the DOM
 * renderer (docs/benchmarks-browser.md: a flood took 4-5 times as long and
 * the GPU process burnt seconds of CPU).
 */
const SOFTWARE_GL = /swiftshader|llvmpipe|softpipe|software rasterizer|basic render driver/i;

/**
 * pickRenderer chooses the terminal's renderer: option is the page's
 * ?renderer= ('dom', 'webgl' or anything else: automatic), gl what the
 * browser offers (null: no WebGL 2 context; else {name}, the unmasked
 * renderer name, '' if unknown). Automatic means WebGL on a GPU, the DOM
 * renderer on a software rasterizer; ?renderer=webgl uses WebGL wherever
 * there is a context.
 */
export function pickRenderer(option, gl) {
  if (option === 'dom' || !gl) return 'dom';
  if (option === 'webgl') return 'webgl';
  return SOFTWARE_GL.test(gl.name) ? 'dom' : 'webgl';
}

/** EARLY_INPUT_MAX bounds the keys kept while attaching (UTF-16 code units). */
export const EARLY_INPUT_MAX = 4096;

export class InputGate {
  constructor(max = EARLY_INPUT_MAX) {
    this.max = max;
    this.sub = null; // the live Subscription
    this.role = null; // 'control' | 'view' | null (not known yet)
    this.exited = false;
    this.early = null; // keys kept while attaching, or null: not attaching
    this.dropped = 0; // UTF-16 code units typed while attaching beyond max
  }

  /**
   * attaching starts keeping keys until the next subscription. Keys already
   * kept (typed while the page loaded, before it knew which channel it
   * attaches) go to the channel now being attached.
   */
  attaching() {
    if (this.early === null) {
      this.early = '';
      this.dropped = 0;
    }
    this.exited = false;
  }

  /** cancel forgets the keys kept for an attach that failed. */
  cancel() {
    this.early = null;
  }

  /** subscribed: sub is live; the keys kept are sent on it. */
  subscribed(sub) {
    this.sub = sub;
    this.exited = false;
    const keys = this.early;
    this.early = null;
    if (keys && this.role === 'control') sub.sendInput(keys);
  }

  ended(sub) {
    if (this.sub === sub) this.sub = null;
  }

  setRole(role) {
    this.role = role;
    if (role === 'view') this.early = null;
  }

  /** exit: the program exited; nothing more is sent (the host would reset it). */
  exit() {
    this.exited = true;
  }

  /**
   * input routes data typed by the user and returns what became of it:
   * 'sent', 'kept' (attaching), 'view-only', 'exited' or 'dropped'
   * (reconnecting, or beyond the bound while attaching).
   */
  input(data) {
    if (this.exited) return 'exited';
    if (this.role === 'view') return 'view-only';
    if (this.sub && this.role === 'control') {
      this.sub.sendInput(data);
      return 'sent';
    }
    if (this.early !== null) {
      if (this.early.length + data.length <= this.max) {
        this.early += data;
        return 'kept';
      }
      this.dropped += data.length;
    }
    return 'dropped';
  }
}

/**
 * ResizePolicy decides the terminal/resize requests of one page.
 * measure() returns {rows, cols} that fit the viewport (or null);
 * request(rows, cols) sends terminal/resize on the live subscription;
 * onClipped(clipped) is told when clippedBy(host size, fit) changes.
 *
 * The host (pty/size.go) takes a subscription's first request as a report
 * of the viewer's size and every later one as the user resizing: so the
 * page reports once per subscription, and asks again only for an explicit
 * act (its viewport changed, the clipped badge).
 *
 * A fit measured at one size can be a column off at another: xterm's cell
 * width is its canvas width, rounded to a pixel, over the columns, so it
 * moves a little with the column count (900 px fit 114 columns measured
 * at 66 and 115 measured at 114). When the host applies the size this page
 * asked for, it measures again and asks once more if the fit moved
 * (settling: not again after that, so two sizes never alternate).
 */
export class ResizePolicy {
  constructor({ measure, request, onClipped }) {
    this.measure = measure;
    this.request = request;
    this.onClipped = onClipped ?? (() => {});
    this.ready = false; // channel/ready of the live subscription applied
    this.canRequest = false; // control role, a live subscription, not exited
    this.rows = 0; // the host's size
    this.cols = 0;
    this.lastFit = ''; // "RxC" that fitted the viewport when last measured
    this.sent = ''; // "RxC" last told the host on this subscription ('': nothing yet)
    this.clipped = null;
    this.requests = 0;
    this.settling = false; // a request is out whose size, once applied, is measured again
  }

  /** attaching: this page attaches a channel (it reports its size at channel/ready, as on every subscription). */
  attaching() {}

  /** viewport: this page's viewport (or font) changed; call debounced. */
  viewport() {
    const d = this.measure();
    if (!d) return;
    const key = `${d.rows}x${d.cols}`;
    if (key !== this.lastFit) {
      this.lastFit = key;
      // A window resized by its user: explicit. Before the report, the
      // report carries it.
      if (this.ready && this.sent && key !== this.sent) this.send(d);
    }
    this.updateClipped(d);
  }

  /** hostSize: the host's terminal/reset or terminal/resize was applied. Shown, not fought. */
  hostSize(rows, cols) {
    this.rows = rows;
    this.cols = cols;
    // The first size applied after a request: the one asked for, measured
    // again (another viewer's size that came first ends the settling).
    const settle = this.settling && `${rows}x${cols}` === this.sent;
    this.settling = false;
    if (settle) {
      const d = this.measure();
      const key = d && `${d.rows}x${d.cols}`;
      if (key && key !== this.sent && this.ready) {
        this.lastFit = key;
        this.send(d, false);
      }
    }
    this.updateClipped();
  }

  /** readied: channel/ready applied; canRequest says whether this page may resize. */
  readied(canRequest) {
    this.ready = true;
    this.canRequest = canRequest;
    this.report();
    this.updateClipped();
  }

  /** ended: the subscription ended; the next one reports again. */
  ended() {
    this.ready = false;
    this.canRequest = false;
    this.sent = '';
    this.settling = false;
  }

  setCanRequest(v) {
    this.canRequest = v;
    if (v && this.ready) this.report();
  }

  /** report tells the host this page's size once per subscription, even if the terminal has it already. */
  report() {
    if (this.sent || !this.ready || !this.canRequest) return;
    const d = this.measure();
    if (!d) return;
    this.lastFit = `${d.rows}x${d.cols}`;
    this.send(d);
  }

  /** fit asks for the size that fits the viewport now (the clipped badge): an explicit resize; it returns whether a request went out. */
  fit(d = this.measure()) {
    if (!d || !this.ready || !this.canRequest) return false;
    this.lastFit = `${d.rows}x${d.cols}`;
    this.send(d);
    return true;
  }

  send(d, settle = true) {
    if (!this.canRequest) return;
    this.sent = `${d.rows}x${d.cols}`;
    this.settling = settle;
    this.requests++;
    this.request(d.rows, d.cols);
  }

  updateClipped(d = this.measure()) {
    const c = clippedBy(this.rows ? { rows: this.rows, cols: this.cols } : null, d);
    const changed = JSON.stringify(c) !== JSON.stringify(this.clipped);
    this.clipped = c;
    if (changed) this.onClipped(c);
  }
}
