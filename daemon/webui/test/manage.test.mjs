// The page's channel management requests (Session.createTerminal,
// restartChannel, closeChannel) and who may create (createsChannels).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Session } from '../src/session.js';
import { FakeSocket, initResult } from './harness.mjs';

async function connectWith(access) {
  const p = Session.connect({ url: 'ws://h/v1/ws', WebSocket: FakeSocket, token: 'tok' });
  const ws = FakeSocket.instances[FakeSocket.instances.length - 1];
  ws.open();
  const [init] = ws.take();
  ws.recv({ jsonrpc: '2.0', id: init.id, result: initResult({ access }) });
  return { session: await p, ws };
}

test('only role control over all channels may create', async () => {
  assert.equal((await connectWith({ role: 'control' })).session.createsChannels, true);
  assert.equal((await connectWith({ role: 'control', channels: [] })).session.createsChannels, true);
  assert.equal((await connectWith({ role: 'control', channels: ['ahp-terminal:/a'] })).session.createsChannels, false);
  assert.equal((await connectWith({ role: 'view' })).session.createsChannels, false);
});

test('createTerminal, restartChannel and closeChannel send their requests', async () => {
  const { session, ws } = await connectWith({ role: 'control' });
  const created = session.createTerminal();
  let [req] = ws.take();
  assert.deepEqual([req.method, req.params], ['channels/create', { type: 'terminal' }]);
  ws.recv({ jsonrpc: '2.0', id: req.id, result: { channel: 'ahp-terminal:/2' } });
  assert.equal(await created, 'ahp-terminal:/2');

  const restarted = session.restartChannel('ahp-terminal:/2');
  [req] = ws.take();
  assert.deepEqual([req.method, req.params], ['channels/restart', { channel: 'ahp-terminal:/2' }]);
  ws.recv({ jsonrpc: '2.0', id: req.id, error: { code: -32602, message: 'ahp-terminal:/2 is still running' } });
  await assert.rejects(restarted, /still running/);

  const closed = session.closeChannel('ahp-terminal:/2');
  [req] = ws.take();
  assert.deepEqual([req.method, req.params], ['channels/close', { channel: 'ahp-terminal:/2' }]);
  ws.recv({ jsonrpc: '2.0', id: req.id, result: {} });
  await closed;
});
