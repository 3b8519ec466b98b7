import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OldestFirstMap } from '../../src/core/oldest-first-map.ts';

test('OldestFirstMap holds at most its bound; the oldest entry leaves first', () => {
  const map = new OldestFirstMap<string, number>(3);
  for (const [key, value] of [['a', 1], ['b', 2], ['c', 3]] as const) map.set(key, value);
  // Setting a held key again makes it the newest.
  map.set('a', 10);
  map.set('d', 4);
  assert.equal(map.size, 3);
  assert.equal(map.get('b'), undefined, 'the oldest left');
  assert.equal(map.get('a'), 10);
  for (let i = 0; i < 1000; i++) map.set(`flood-${i}`, i);
  assert.equal(map.size, 3);
  assert.equal(map.get('flood-999'), 999);
  map.delete('flood-999');
  assert.equal(map.get('flood-999'), undefined);
  map.clear();
  assert.equal(map.size, 0);
});

test('OldestFirstMap with a bound of 0 keeps nothing', () => {
  const map = new OldestFirstMap<string, number>(0);
  map.set('a', 1);
  assert.equal(map.size, 0);
  assert.equal(map.get('a'), undefined);
});
