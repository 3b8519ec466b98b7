import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  type ConnInfo,
  MAX_CONN_INFO_JSON_LENGTH,
  parseConnInfo,
  sanitizeConnInfo,
  serializeConnInfo,
  SVC_CONN_INFO_HEADER,
  SVC_CONN_INFO_QUERY_PARAM,
} from '../../src/core/conn-info.ts';

const FULL = { address: '203.0.113.7', addressType: 'IPv4', port: 443, transport: 'tcp' };

test('conn info channel names match the propagation table', () => {
  assert.equal(SVC_CONN_INFO_HEADER, 'X-Svc-Conn-Info');
  assert.equal(SVC_CONN_INFO_QUERY_PARAM, 'conn_info');
  assert.equal(MAX_CONN_INFO_JSON_LENGTH, 1024);
});

test('META-01 only the four known fields survive', () => {
  const info = parseConnInfo(JSON.stringify({ ...FULL, evil: 'x' }));
  assert.deepEqual(info, { remote: FULL });
  assert.deepEqual(Object.keys(info!.remote).sort(), [
    'address',
    'addressType',
    'port',
    'transport',
  ]);
  assert.deepEqual(Object.keys(info!), ['remote']);
});

test('sanitizeConnInfo accepts the nested Hono shape and drops extra members', () => {
  assert.deepEqual(sanitizeConnInfo({ remote: { ...FULL, token: 'x' }, local: { port: 1 } }), {
    remote: FULL,
  });
  assert.deepEqual(sanitizeConnInfo({ remote: { port: 8080 } }), { remote: { port: 8080 } });
});

test('sanitizeConnInfo keeps IPv6 text forms including zone ids', () => {
  for (
    const address of ['2001:db8::1', '::1', 'fe80::1%eth0', '::ffff:192.0.2.1', 'fe80::1%en_0-1']
  ) {
    assert.deepEqual(sanitizeConnInfo({ address, addressType: 'IPv6' }), {
      remote: { address, addressType: 'IPv6' },
    });
  }
});

test('META-02 an address outside the bounded charset is dropped with its addressType', () => {
  for (const address of ['1.2.3.4\r\nX: y', 'a b', '<script>', 'x'.repeat(300), '', '[::1]', 'é']) {
    const raw = JSON.stringify({ ...FULL, address });
    assert.deepEqual(parseConnInfo(raw), { remote: { port: 443, transport: 'tcp' } }, address);
  }
  assert.deepEqual(sanitizeConnInfo({ address: 'x'.repeat(64), addressType: 'IPv4' }), {
    remote: { address: 'x'.repeat(64), addressType: 'IPv4' },
  });
  assert.deepEqual(sanitizeConnInfo({ address: 'x'.repeat(65), addressType: 'IPv4', port: 1 }), {
    remote: { port: 1 },
  });
  assert.deepEqual(sanitizeConnInfo({ address: 17, addressType: 'IPv4', port: 1 }), {
    remote: { port: 1 },
  });
});

test('META-03 an out-of-range port, unknown transport or unknown addressType is dropped', () => {
  for (const port of [70000, -1, 1.5, '443', 65536, NaN, null]) {
    assert.deepEqual(
      sanitizeConnInfo({ ...FULL, port }),
      { remote: { address: '203.0.113.7', addressType: 'IPv4', transport: 'tcp' } },
      `port ${String(port)}`,
    );
  }
  assert.deepEqual(sanitizeConnInfo({ ...FULL, transport: 'quic' }), {
    remote: { address: '203.0.113.7', addressType: 'IPv4', port: 443 },
  });
  assert.deepEqual(sanitizeConnInfo({ ...FULL, addressType: 'IPv5' }), {
    remote: { address: '203.0.113.7', port: 443, transport: 'tcp' },
  });
  assert.deepEqual(sanitizeConnInfo({ ...FULL, transport: 'TCP', addressType: 'ipv4' }), {
    remote: { address: '203.0.113.7', port: 443 },
  });
  assert.deepEqual(sanitizeConnInfo({ port: 0, transport: 'udp' }), {
    remote: { port: 0, transport: 'udp' },
  });
  assert.deepEqual(sanitizeConnInfo({ port: 65535 }), { remote: { port: 65535 } });
});

test('META-04 non-objects and invalid JSON yield no conn info', () => {
  for (const raw of ['[]', '"1.2.3.4"', 'null', '42', '{', '', 'true', '{}', '{"evil":1}']) {
    assert.equal(parseConnInfo(raw), undefined, `raw ${JSON.stringify(raw)}`);
  }
  for (const value of [[], '1.2.3.4', null, 42, undefined, true, [FULL]]) {
    assert.equal(sanitizeConnInfo(value), undefined);
  }
  assert.equal(parseConnInfo(null), undefined);
  assert.equal(parseConnInfo(undefined), undefined);
});

test('sanitizeConnInfo refuses a non-object remote and class instances', () => {
  assert.equal(sanitizeConnInfo({ remote: '1.2.3.4' }), undefined);
  assert.equal(sanitizeConnInfo({ remote: null, ...FULL }), undefined);
  assert.equal(sanitizeConnInfo({ remote: [FULL] }), undefined);
  assert.equal(sanitizeConnInfo(new Map([['address', '1.2.3.4']])), undefined);
  assert.equal(sanitizeConnInfo(new URL('http://1.2.3.4/')), undefined);
});

test('sanitizeConnInfo reads own data properties only', () => {
  const inherited = Object.create({ address: '203.0.113.7', port: 443 });
  assert.equal(sanitizeConnInfo(inherited), undefined);
  let getterRan = false;
  const withGetter = {
    port: 443,
    get address() {
      getterRan = true;
      return '203.0.113.7';
    },
  };
  assert.deepEqual(sanitizeConnInfo(withGetter), { remote: { port: 443 } });
  assert.equal(getterRan, false);
  const polluted = JSON.parse('{"__proto__":{"address":"1.2.3.4"},"port":1}');
  assert.deepEqual(sanitizeConnInfo(polluted), { remote: { port: 1 } });
});

test('parseConnInfo refuses text longer than 1024 characters', () => {
  const padded = JSON.stringify({ ...FULL, pad: 'p'.repeat(1100) });
  assert.ok(padded.length > 1024);
  assert.equal(parseConnInfo(padded), undefined);
  const exact = JSON.stringify({ ...FULL, pad: '' });
  const fitted = exact.replace('"pad":""', `"pad":"${'p'.repeat(1024 - exact.length)}"`);
  assert.equal(fitted.length, 1024);
  assert.deepEqual(parseConnInfo(fitted), { remote: FULL });
});

test('serializeConnInfo writes flat remote JSON that parses back', () => {
  const info: ConnInfo = {
    remote: { address: '2001:db8::1', addressType: 'IPv6', port: 1, transport: 'udp' },
  };
  const text = serializeConnInfo(info);
  assert.deepEqual(JSON.parse(text), info.remote);
  assert.deepEqual(parseConnInfo(text), info);
  const url = new URL('wss://svc.example/rpc/a');
  url.searchParams.set(SVC_CONN_INFO_QUERY_PARAM, text);
  assert.deepEqual(
    parseConnInfo(new URL(url.href).searchParams.get(SVC_CONN_INFO_QUERY_PARAM)),
    info,
  );
});

test('serializeConnInfo never forwards unknown or invalid members', () => {
  const hostile = {
    remote: { address: 'a b', addressType: 'IPv4', port: 443, secret: 'x' },
  } as unknown as ConnInfo;
  assert.equal(serializeConnInfo(hostile), '{"port":443}');
  assert.equal(serializeConnInfo({ remote: {} }), '{}');
});
