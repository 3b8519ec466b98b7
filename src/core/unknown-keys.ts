/**
 * Finding and naming a key nobody reads in an options object: the two halves of every unknown-key
 * refusal, kept free of imports so the error classes can use them too (`AbilityHandlerError`
 * refuses its own unknown options with a `TypeError`).
 *
 * @module
 */

/** The first own enumerable key of `value` that `known` does not list, if any. */
export function firstUnknownKey(value: object, known: readonly string[]): string | undefined {
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) return key;
  }
  return undefined;
}

/**
 * The message part naming an unknown key and the accepted ones:
 * ``unknown option `ingres` (accepted: id, title, ...)``.
 */
export function unknownKeyProblem(
  key: string,
  known: readonly string[],
  noun: 'option' | 'field' = 'option',
): string {
  // The key is quoted as JSON when it holds characters that would garble the message.
  const shown = /^[\w$-]{1,64}$/.test(key) ? key : JSON.stringify(key.slice(0, 64));
  return `unknown ${noun} \`${shown}\` (accepted: ${known.join(', ')})`;
}
