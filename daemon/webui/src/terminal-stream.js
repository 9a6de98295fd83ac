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

/**
 * terminalConsumer returns {onMessage, counts} for Session.subscribe/Client.attach
 * (terminal/output, terminal/reset snapshots, terminal/resize, channel/ready,
 * terminal/exit; anything else is released unread).
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
  const counts = { output: 0, outputChars: 0, resets: 0 };
  return {
    counts,
    onMessage(msg, release) {
      const p = msg.params;
      switch (msg.method) {
        case 'terminal/output': {
          const data = typeof p.data === 'string' ? p.data : '';
          counts.output++;
          counts.outputChars += data.length;
          term.write(data, release);
          return;
        }
        case 'terminal/reset':
          counts.resets++;
          // Full reset (screen, scrollback, modes, title), then the host's size.
          inStreamOrder(() => {
            term.reset();
            resize(p);
            release();
          });
          return;
        case 'terminal/resize':
          inStreamOrder(() => {
            resize(p);
            release();
          });
          return;
        case 'channel/ready':
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
    },
  };
}
