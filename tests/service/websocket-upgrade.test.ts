import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  isWebSocketUpgradeRequest,
  resolveWebSocketUpgrader,
  SVC_WEBSOCKET_UPGRADER,
  webSocketPairUpgrader,
  type WebSocketUpgrader,
  withWebSocketUpgrader,
} from '../../src/service/websocket-upgrade.ts';

const hasWebSocketPair = typeof (globalThis as { WebSocketPair?: unknown }).WebSocketPair ===
  'function';

function upgrader(name: string): WebSocketUpgrader & { name: string } {
  return { name, upgrade: () => new Response(name) };
}

test('an explicit upgrader wins over one placed on the runtime', () => {
  const explicit = upgrader('explicit');
  const placed = upgrader('placed');
  assert.equal(resolveWebSocketUpgrader(withWebSocketUpgrader({}, placed), explicit), explicit);
});

test('an upgrader a serving helper placed on the env is found under the registered symbol', () => {
  const placed = upgrader('placed');
  const env = withWebSocketUpgrader({ DB: 'binding' }, placed);
  assert.equal(resolveWebSocketUpgrader(env), placed);
  assert.equal(SVC_WEBSOCKET_UPGRADER, Symbol.for('svcplane.websocket-upgrader'));
  assert.equal(env[SVC_WEBSOCKET_UPGRADER], placed);
});

test('withWebSocketUpgrader keeps the user env fields and leaves the original untouched', () => {
  const userEnv = { API_KEY: 'k', nested: { a: 1 } };
  const env = withWebSocketUpgrader(userEnv, upgrader('placed'));
  assert.equal(env.API_KEY, 'k');
  assert.equal(env.nested, userEnv.nested);
  assert.equal(SVC_WEBSOCKET_UPGRADER in userEnv, false);
  assert.equal(
    typeof withWebSocketUpgrader(undefined, upgrader('x'))[SVC_WEBSOCKET_UPGRADER],
    'object',
  );
});

test('something that is not an upgrader on the runtime is ignored', {
  skip: hasWebSocketPair ? 'WebSocketPair detection answers here' : false,
}, () => {
  assert.equal(
    resolveWebSocketUpgrader({ [SVC_WEBSOCKET_UPGRADER]: { upgrade: 'no' } }),
    undefined,
  );
  assert.equal(resolveWebSocketUpgrader(undefined), undefined);
  assert.equal(resolveWebSocketUpgrader('env'), undefined);
});

test('Workers are detected by the WebSocketPair global', {
  skip: hasWebSocketPair ? false : 'no WebSocketPair in this runtime',
}, () => {
  assert.equal(resolveWebSocketUpgrader(undefined), webSocketPairUpgrader);
  assert.equal(resolveWebSocketUpgrader({}), webSocketPairUpgrader);
});

test('the WebSocketPair upgrader answers 101 with the client socket and accepts the server end', {
  skip: hasWebSocketPair ? false : 'no WebSocketPair in this runtime',
}, async () => {
  const accepted: WebSocket[] = [];
  const response = await webSocketPairUpgrader.upgrade(
    new Request('https://svc.internal/rpc/a.b', { headers: { Upgrade: 'websocket' } }),
    undefined,
    (socket) => accepted.push(socket),
  );
  assert.equal(response.status, 101);
  assert.ok((response as Response & { webSocket?: unknown }).webSocket);
  assert.equal(accepted.length, 1);
  accepted[0].close(1000, 'done');
});

test('the WebSocketPair upgrader refuses where there is no WebSocketPair', {
  skip: hasWebSocketPair ? 'WebSocketPair exists here' : false,
}, () => {
  assert.throws(
    () => webSocketPairUpgrader.upgrade(new Request('https://x/'), undefined, () => {}),
    /WebSocketPair/,
  );
});

test('isWebSocketUpgradeRequest reads the Upgrade header case-insensitively, as a token list', () => {
  const request = (upgrade?: string) =>
    new Request('https://x/', upgrade === undefined ? {} : { headers: { Upgrade: upgrade } });
  assert.equal(isWebSocketUpgradeRequest(request('websocket')), true);
  assert.equal(isWebSocketUpgradeRequest(request('WebSocket')), true);
  assert.equal(isWebSocketUpgradeRequest(request('h2c, websocket')), true);
  assert.equal(isWebSocketUpgradeRequest(request('h2c')), false);
  assert.equal(isWebSocketUpgradeRequest(request('websockets')), false);
  assert.equal(isWebSocketUpgradeRequest(request()), false);
});
