/**
 * Assertions for refused configuration: the error is a `SvcConfigurationError` and its message
 * names what was wrong (a misspelt key, the accepted ones).
 */
import assert from 'node:assert/strict';
import { SvcConfigurationError } from '../../src/core/errors.ts';

function checkRefusal(caught: unknown, mentions: string[]): SvcConfigurationError {
  assert.ok(caught instanceof SvcConfigurationError, `expected SvcConfigurationError: ${caught}`);
  for (const mention of mentions) {
    assert.ok(caught.message.includes(mention), `"${caught.message}" should name ${mention}`);
  }
  return caught;
}

/** Asserts `run` throws a SvcConfigurationError whose message contains every `mention`. */
export function refusedNaming(run: () => unknown, ...mentions: string[]): SvcConfigurationError {
  let caught: unknown;
  assert.throws(run, (error: unknown) => {
    caught = error;
    return true;
  });
  return checkRefusal(caught, mentions);
}

/** Asserts `pending` rejects with a SvcConfigurationError whose message names every `mention`. */
export async function rejectedNaming(
  pending: Promise<unknown>,
  ...mentions: string[]
): Promise<SvcConfigurationError> {
  let caught: unknown;
  await assert.rejects(pending, (error: unknown) => {
    caught = error;
    return true;
  });
  return checkRefusal(caught, mentions);
}
