// page-text.js — words the page shows that follow rules: close codes, the
// channel list's labels and the document title. DOM-free, node-tested.

// What the close codes of PROTOCOL.md §1 mean, and the browser's own.
const CLOSE_MEANING = {
  1000: 'normal close',
  1001: 'the daemon shut down',
  1003: 'binary data refused',
  1006: 'the connection was lost without a close frame',
  1008: 'policy',
  1009: 'message too big',
  1011: 'internal error of the daemon',
  1012: 'the daemon is upgrading in place; reconnecting',
  4000: 'the daemon stopped answering',
};

/**
 * closeText describes a WebSocket close as the daemon sent it: the code and
 * the reason verbatim, with what the code means when the reason does not
 * say (1006 is never sent by a daemon: the browser reports it when the
 * connection just went away).
 */
export function closeText(code, reason) {
  if (code == null) return reason || 'closed';
  const meaning = CLOSE_MEANING[code];
  const said = reason ? `“${reason}”` : '';
  if (code === 1006) return `connection lost (1006, no close frame)`;
  return `closed ${code}${said ? ' ' + said : ''}${meaning && !reason ? ' (' + meaning + ')' : ''}`;
}

/** channelLabel is a channel's name in the list: its title, else the id from its URI. */
export function channelLabel(c) {
  if (c.title) return c.title;
  const m = /^ahp-[a-z]+:\/(.*)$/.exec(c.channel ?? '');
  return m ? m[1] : c.channel;
}

/** documentTitle is the tab's title: "<title> — ahpd", the channel's id without one. */
export function documentTitle(title, channel) {
  const t = (title || '').trim();
  if (t) return `${t} — ahpd`;
  if (channel) return `${channelLabel({ channel })} — ahpd`;
  return 'ahpd';
}
