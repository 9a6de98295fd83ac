// terminal-stream.js — applies a terminal channel's logical messages to an
// xterm.js Terminal (or anything with write/reset/resize), in stream order:
// the DOM-free half of the terminal view (terminal.js), so node tests drive
// it with a fake terminal.
//
// Every message is released from a term.write callback: output when xterm
// has parsed it, and reset/resize/ready/exit when they have been applied
// after all output before them (PROTOCOL.md §8). Credit therefore follows
// rendering, and the browser never holds more than window + one message of
// unparsed output, however fast the PTY writes (a `yes` flood).
//
// A long snapshot's terminal/reset carries a preview: the screen the
// snapshot ends on, drawn from the top-left corner of a blank screen
// (docs/protocol-decisions.md, "A preview of the screen before a long
// snapshot"). xterm.js grows its scrollback one line at a time, about
// 40 µs a line here, so a scrollback of 10,000 lines takes it 0.4 s to
// apply, with the scrollback scrolling by. With a preview the page draws
// the preview on the alternate screen, waits until xterm has rendered it,
// and applies the snapshot behind it: back on the normal screen with
// rendering held (synchronized output, DEC mode 2026) until channel/ready.
// The screen shows where the snapshot ends at once, and the scrollback is
// complete when the next frame is drawn. Messages that arrive meanwhile
// wait here, in order and unreleased: at most the window.

/** PREVIEW_BEFORE goes before a preview: the alternate screen, at home. */
export const PREVIEW_BEFORE = '\x1b[?1047h\x1b[H';
/**
 * PREVIEW_AFTER goes after it: rendering held, the normal screen, at home,
 * the cursor shown (a preview of a screen whose cursor is hidden hides it,
 * and the snapshot starts from a reset terminal's state).
 */
export const PREVIEW_AFTER = '\x1b[?2026h\x1b[?1047l\x1b[H\x1b[?25h';
/** PREVIEW_END goes before channel/ready: rendering resumes. */
export const PREVIEW_END = '\x1b[?2026l';
/** PREVIEW_WAIT_MS bounds the wait for the preview's frame. */
export const PREVIEW_WAIT_MS = 100;

// afterRender calls fn once term has rendered a frame, or after
// PREVIEW_WAIT_MS, whichever is first; at once in a hidden page, which
// draws no frames. It returns a function that cancels the wait.
function afterRender(term, fn) {
  if (globalThis.document?.hidden) {
    fn();
    return () => {};
  }
  let listener;
  let timer = setTimeout(() => done(), PREVIEW_WAIT_MS);
  const cancel = () => {
    if (timer === undefined) return false;
    clearTimeout(timer);
    timer = undefined;
    listener?.dispose();
    return true;
  };
  const done = () => {
    if (cancel()) fn();
  };
  listener = term.onRender?.(done);
  return cancel;
}

/**
 * terminalConsumer returns {onMessage, end, holding, counts} for
 * Session.subscribe/Client.attach (terminal/output, terminal/reset
 * snapshots, terminal/resize, channel/ready, terminal/exit; anything else
 * is released unread). end(sub) is for the view's onEnd: what the ended
 * subscription left waiting behind a preview is released unapplied.
 * holding() is true from a preview until its snapshot is applied (the page
 * ignores the mouse wheel then: on the preview's alternate screen xterm
 * would turn it into arrow keys for the program).
 * hooks (all optional): onSize(rows, cols), onReady(), onExit({code, signal}).
 */
export function terminalConsumer(term, hooks = {}) {
  // inStreamOrder runs fn after every earlier write has been parsed, so a
  // reset or resize never overtakes output queued before it.
  const inStreamOrder = (fn) => term.write('', fn);
  const resize = (p) => {
    if (!(p.rows > 0 && p.cols > 0)) return;
    if (term.rows !== p.rows || term.cols !== p.cols) term.resize(p.cols, p.rows);
    hooks.onSize?.(p.rows, p.cols);
  };
  // counts: messages applied by kind, for the page's test hooks and
  // benchmarks (a terminal/reset is a snapshot: one per attach, and one
  // each time the host found this page too far behind).
  const counts = { output: 0, outputChars: 0, resets: 0, previews: 0 };
  // wait: while a preview waits for its frame, {sub, held, cancel}: held
  // are the messages that came meanwhile, [msg, release, sub], in order.
  let wait = null;
  // previewing: while a snapshot is applied with rendering held, {sub}:
  // the subscription whose channel/ready resumes it; else null.
  let previewing = null;
  // replay hands held messages to onMessage in order (a reset with a
  // preview among them waits again); one that throws is released, so
  // credit never stalls on it.
  const replay = (held) => {
    for (const [m, r, s] of held) {
      try {
        onMessage(m, r, s);
      } catch (err) {
        r();
        console.error('ahpd terminal stream:', err);
      }
    }
  };
  const onMessage = (msg, release, sub) => {
    if (wait) {
      wait.held.push([msg, release, sub]);
      return;
    }
    const p = msg.params;
    switch (msg.method) {
      case 'terminal/output': {
        const data = typeof p.data === 'string' ? p.data : '';
        counts.output++;
        counts.outputChars += data.length;
        term.write(data, release);
        return;
      }
      case 'terminal/reset': {
        counts.resets++;
        // Full reset (screen, scrollback, modes, title), then the host's size.
        inStreamOrder(() => {
          term.reset();
          resize(p);
          release();
        });
        previewing = null;
        if (typeof p.preview !== 'string' || p.preview === '') return;
        counts.previews++;
        const w = (wait = { sub, held: [], cancel: null });
        term.write(PREVIEW_BEFORE + p.preview, () => {
          if (wait !== w) return; // the subscription ended meanwhile
          w.cancel = afterRender(term, () => {
            wait = null;
            previewing = { sub };
            term.write(PREVIEW_AFTER);
            replay(w.held);
          });
        });
        return;
      }
      case 'terminal/resize':
        inStreamOrder(() => {
          resize(p);
          release();
        });
        return;
      case 'channel/ready':
        if (previewing?.sub === sub) {
          previewing = null;
          term.write(PREVIEW_END);
        }
        inStreamOrder(() => {
          release();
          hooks.onReady?.();
        });
        return;
      case 'terminal/exit':
        inStreamOrder(() => {
          release();
          hooks.onExit?.({ code: p.code ?? null, signal: p.signal ?? null });
        });
        return;
      default:
        release(); // unknown data: consumed by ignoring it
    }
  };
  const end = (sub) => {
    if (wait && wait.sub === sub) {
      const w = wait;
      wait = null;
      w.cancel?.();
      // The ended subscription's messages are released unapplied (its
      // successor starts with a snapshot); any other's are applied.
      const others = [];
      for (const h of w.held) {
        if (h[2] === sub) h[1]();
        else others.push(h);
      }
      replay(others);
    }
    if (previewing?.sub === sub) {
      previewing = null;
      term.write(PREVIEW_END);
    }
  };
  const holding = () => wait !== null || previewing !== null;
  return { counts, onMessage, end, holding };
}
