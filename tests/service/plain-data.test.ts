import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RpcTarget } from 'capnweb';
import { isPlainData, MAX_PLAIN_DATA_NODES } from '../../src/service/plain-data.ts';
import { ResourceOutputs } from '../../src/service/resource-outputs.ts';

test('primitives, plain objects, arrays, dates, bytes and errors are plain data', () => {
  const values: unknown[] = [
    null,
    undefined,
    0,
    'text',
    true,
    10n,
    { id: 'a', tags: ['x', 'y'], nested: { deep: [1, { n: null }] } },
    [],
    Object.assign(Object.create(null), { bare: 1 }),
    new Date(0),
    new Uint8Array([1, 2]),
    new TypeError('as data'),
  ];
  values.forEach((value, index) => assert.equal(isPlainData(value), true, `value ${index}`));
});

test('functions, targets, instances, promises and streams are not plain data', () => {
  class Widget extends RpcTarget {
    [Symbol.dispose](): void {}
  }
  class Plain {
    n = 1;
  }
  const values: unknown[] = [
    () => 1,
    new Widget(),
    new Plain(),
    Promise.resolve(1),
    new ReadableStream(),
    new Map(),
    { nested: [{ callback: () => 1 }] },
    [1, 2, new Widget()],
    new Proxy(() => {}, {}),
  ];
  values.forEach((value, index) => assert.equal(isPlainData(value), false, `value ${index}`));
});

test('a cycle, a value past the node limit or a throwing getter is not plain data', () => {
  const cyclic: Record<string, unknown> = { a: 1 };
  cyclic.self = cyclic;
  assert.equal(isPlainData(cyclic), false);
  assert.equal(isPlainData(new Array(MAX_PLAIN_DATA_NODES).fill({})), false);
  assert.equal(isPlainData(new Array(MAX_PLAIN_DATA_NODES - 1).fill(1)), true);
  const guarded = {
    get secret(): never {
      throw new Error('no');
    },
  };
  assert.equal(isPlainData(guarded), false);
  const hostile = new Proxy({}, {
    ownKeys() {
      throw new Error('trap');
    },
  });
  assert.equal(isPlainData(hostile), false);
});

test('a record of outputs is plain only while every output is known and plain', async () => {
  const outputs = new ResourceOutputs();
  assert.equal(outputs.allPlainData(), true);
  assert.deepEqual(outputs.noted({ ok: true }), { ok: true });
  assert.equal(outputs.allPlainData(), true);

  let finish!: (value: unknown) => void;
  const later = outputs.counted(new Promise((resolve) => (finish = resolve)));
  assert.equal(outputs.allPlainData(), false, 'an output still to come');
  finish({ ok: true });
  await later;
  await Promise.resolve();
  assert.equal(outputs.allPlainData(), true);

  const failing = outputs.counted(Promise.reject(new Error('refused')));
  await assert.rejects(failing);
  await Promise.resolve();
  assert.equal(outputs.allPlainData(), true, 'a rejection settles it too');
  assert.equal(outputs.counted(5), 5);

  const withCallback = { callback: () => 1 };
  assert.equal(outputs.noted(withCallback), withCallback);
  assert.equal(outputs.allPlainData(), false);
});
