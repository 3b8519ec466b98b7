/**
 * Deterministic fuzzing for the network-parser tests: a seeded PRNG, mutations of text, bytes and
 * JSON documents shaped after the security checklist's hostile inputs, a time bound on every
 * call, and a loop whose failures name the seed, the iteration, the mutation and the input.
 *
 * A failing case replays with `SVC_FUZZ_SEED=<seed>` in the environment (where the runtime has
 * one): the seed alone decides every mutation. Keys, signatures, UUIDs and clocks are not seeded,
 * so bytes those produce differ between runs while the positions and kinds of mutations do not.
 */

// ---------------------------------------------------------------------------------------------
// Seeded randomness

/** A deterministic source of choices. */
export interface Random {
  readonly seed: number;
  /** An unsigned 32-bit integer. */
  next(): number;
  /** An integer in `[0, n)`; 0 when `n` is not positive. */
  below(n: number): number;
  /** An integer in `[min, max]`. */
  between(min: number, max: number): number;
  /** True with the given probability. */
  chance(probability: number): boolean;
  /** One of `items` (which must not be empty). */
  pick<T>(items: readonly T[]): T;
}

/** mulberry32: small, fast and good enough to spread mutations; never used for secrets. */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
  const below = (n: number): number => (n <= 0 ? 0 : Math.floor((next() / 2 ** 32) * n));
  return {
    seed: seed >>> 0,
    next,
    below,
    between: (min, max) => min + below(max - min + 1),
    chance: (probability) => next() / 2 ** 32 < probability,
    pick: (items) => items[below(items.length)],
  };
}

/** The seeds to run: `SVC_FUZZ_SEED` (decimal or 0x hex) when set, else `defaults`. */
export function fuzzSeeds(defaults: readonly number[]): number[] {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process
    ?.env;
  const raw = env?.SVC_FUZZ_SEED;
  if (raw === undefined || raw === '') return [...defaults];
  const seed = Number(raw);
  if (!Number.isSafeInteger(seed) || seed < 0 || seed > 0xffffffff) {
    throw new Error(`SVC_FUZZ_SEED must be an integer from 0 to 2^32-1, got ${raw}`);
  }
  return [seed];
}

const hex = (seed: number): string => `0x${(seed >>> 0).toString(16).padStart(8, '0')}`;

// ---------------------------------------------------------------------------------------------
// Describing inputs and bounding calls

/** Printable text of an input for a failure message: escapes kept, long text cut. */
export function describeInput(value: unknown, limit = 1500): string {
  let text: string;
  if (typeof value === 'string') text = JSON.stringify(value);
  else if (value instanceof Uint8Array) {
    text = `bytes(${value.length}) ${
      [...value.subarray(0, limit / 2)].map((byte) => byte.toString(16).padStart(2, '0')).join('')
    }`;
  } else if (typeof value === 'bigint') text = `${value}n`;
  else if (typeof value === 'symbol' || typeof value === 'function' || value === undefined) {
    text = String(value);
  } else {
    try {
      text = JSON.stringify(value) ?? String(value);
    } catch {
      text = Object.prototype.toString.call(value);
    }
  }
  return text.length > limit ? `${text.slice(0, limit)}… (${text.length} characters)` : text;
}

/** A call that did not settle within its bound. */
export class FuzzHang extends Error {
  constructor(label: string, ms: number) {
    super(`${label} did not settle within ${ms} ms`);
    this.name = 'FuzzHang';
  }
}

/** How a bounded call ended. */
export type Outcome<T> = { ok: true; value: T } | { ok: false; error: unknown };

/**
 * Runs `work` and reports how it ended, failing with {@link FuzzHang} when it has not settled
 * within `ms`, or (for synchronous work a timer cannot interrupt) when it took longer than that.
 */
export async function outcomeWithin<T>(
  work: () => T | Promise<T>,
  ms: number,
  label = 'the call',
): Promise<Outcome<T>> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new FuzzHang(label, ms)), ms);
  });
  const started = Date.now();
  let outcome: Outcome<T>;
  try {
    outcome = { ok: true, value: await Promise.race([Promise.resolve().then(work), hang]) };
  } catch (error) {
    if (error instanceof FuzzHang) throw error;
    outcome = { ok: false, error };
  } finally {
    clearTimeout(timer);
  }
  if (Date.now() - started > ms) throw new FuzzHang(label, ms);
  return outcome;
}

// ---------------------------------------------------------------------------------------------
// The fuzz loop

/** One generated case: the input and how it was made (printed on failure). */
export interface FuzzCase<Input> {
  input: Input;
  how: string;
}

/** Options of {@link fuzz}. */
export interface FuzzOptions<Input> {
  name: string;
  seeds: readonly number[];
  iterations: number;
  generate(random: Random, iteration: number): FuzzCase<Input> | Promise<FuzzCase<Input>>;
  check(input: Input, how: string): void | Promise<void>;
  describe?(input: Input): string;
}

/**
 * Runs `iterations` generated cases per seed, in order. The first failing check ends the run
 * with an error naming the seed, the iteration, the mutation and the input. Returns the number
 * of cases run.
 */
export async function fuzz<Input>(options: FuzzOptions<Input>): Promise<number> {
  let count = 0;
  for (const seed of fuzzSeeds(options.seeds)) {
    const random = seededRandom(seed);
    for (let iteration = 0; iteration < options.iterations; iteration++) {
      const { input, how } = await options.generate(random, iteration);
      try {
        await options.check(input, how);
      } catch (error) {
        const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
        throw new Error(
          `${options.name}: seed ${hex(seed)} iteration ${iteration} failed\n` +
            `  mutation: ${how}\n` +
            `  input: ${(options.describe ?? describeInput)(input)}\n` +
            `  ${message}\n` +
            `  replay with SVC_FUZZ_SEED=${hex(seed)}`,
          { cause: error },
        );
      }
      count++;
    }
  }
  return count;
}

// ---------------------------------------------------------------------------------------------
// Text

/** Characters mutations insert: the alphabet, separators, whitespace, escapes, look-alikes. */
const CHARACTERS = [
  'A',
  'z',
  '0',
  '9',
  '-',
  '_',
  '.',
  '=',
  '+',
  '/',
  '*',
  '%',
  ' ',
  '\t',
  '\n',
  '\r',
  '\0',
  '"',
  '\\',
  '{',
  '}',
  '[',
  ']',
  ',',
  ':',
  '\x7f',
  'é',
  'ß',
  'İ',
  '\u0131',
  '\u0085',
  '\u00a0',
  '\u2028',
  '\u202e',
  '\ufeff',
  '\ud800',
  '\udfff',
  '😀',
  'Ａ',
];

/** Whole-value replacements every textual field should survive. */
const CLASSIC_TEXT = [
  '',
  ' ',
  'null',
  'undefined',
  'true',
  'NaN',
  'Infinity',
  '-Infinity',
  '-0',
  '0',
  '1e309',
  '0x10',
  '+1',
  '١٢٣',
  '__proto__',
  'constructor',
  'toString',
  '{}',
  '[]',
  '"',
  "' OR '1'='1",
  '../../etc/passwd',
  '%00',
  '%0d%0aSet-Cookie:%20x=1',
  '\r\nX-Injected: 1',
  '<script>',
  '\ud800',
  'a\udc00\ud800b',
  '😀',
  '.',
  '..',
  '...',
  'a.b.c.d.e',
];

const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

type TextMutation = (random: Random, text: string, maxLength: number) => [string, string];

const position = (random: Random, text: string): number => random.below(text.length + 1);

function span(random: Random, text: string): [number, number] {
  const start = random.below(text.length + 1);
  return [start, start + random.below(Math.min(64, text.length - start) + 1)];
}

function swapCase(character: string): string {
  const upper = character.toUpperCase();
  return upper === character ? character.toLowerCase() : upper;
}

const TEXT_MUTATIONS: TextMutation[] = [
  (random, text) => {
    const at = random.below(text.length);
    const character = random.pick(CHARACTERS);
    return [
      `${text.slice(0, at)}${character}${text.slice(at + 1)}`,
      `replace char ${at} with ${JSON.stringify(character)}`,
    ];
  },
  (random, text) => {
    // Stays inside the base64url alphabet, so the change reaches signature checks.
    const at = random.below(text.length);
    const character = BASE64URL[random.below(64)];
    return [
      `${text.slice(0, at)}${character}${text.slice(at + 1)}`,
      `replace char ${at} with ${character}`,
    ];
  },
  (random, text) => {
    if (text.length === 0) return [text, 'flip a bit of nothing'];
    const at = random.below(text.length);
    const bit = random.below(7);
    const flipped = String.fromCharCode(text.charCodeAt(at) ^ (1 << bit));
    return [`${text.slice(0, at)}${flipped}${text.slice(at + 1)}`, `flip bit ${bit} of char ${at}`];
  },
  (random, text) => {
    const at = position(random, text);
    return random.chance(0.5)
      ? [text.slice(0, at), `truncate to ${at}`]
      : [text.slice(at), `drop the first ${at}`];
  },
  (random, text) => {
    const [start, end] = span(random, text);
    return [`${text.slice(0, start)}${text.slice(end)}`, `delete [${start},${end})`];
  },
  (random, text) => {
    const [start, end] = span(random, text);
    return [
      `${text.slice(0, end)}${text.slice(start, end)}${text.slice(end)}`,
      `duplicate [${start},${end})`,
    ];
  },
  (random, text) => {
    const at = position(random, text);
    let inserted = '';
    for (let n = random.between(1, 6); n > 0; n--) inserted += random.pick(CHARACTERS);
    return [
      `${text.slice(0, at)}${inserted}${text.slice(at)}`,
      `insert ${JSON.stringify(inserted)} at ${at}`,
    ];
  },
  (random, text) => {
    const at = position(random, text);
    const dots = random.pick(['.', '..', '.x', 'x.', '.eyJ9.']);
    return [`${text.slice(0, at)}${dots}${text.slice(at)}`, `insert ${dots} at ${at}`];
  },
  (random, text) => {
    const space = random.pick([' ', '\t', '\n', '\r\n', '\u00a0', '  ']);
    const where = random.pick(['before', 'after', 'around', 'inside']);
    if (where === 'inside') {
      const at = position(random, text);
      return [`${text.slice(0, at)}${space}${text.slice(at)}`, `whitespace at ${at}`];
    }
    return [
      `${where === 'after' ? '' : space}${text}${where === 'before' ? '' : space}`,
      `whitespace ${where}`,
    ];
  },
  (random, text) => {
    const choice = random.below(3);
    if (choice === 0) return [text.toUpperCase(), 'upper case'];
    if (choice === 1) return [text.toLowerCase(), 'lower case'];
    const at = random.below(text.length);
    return [
      `${text.slice(0, at)}${swapCase(text.charAt(at))}${text.slice(at + 1)}`,
      `swap case of char ${at}`,
    ];
  },
  (random, text) => {
    const segments = text.split('.');
    const i = random.below(segments.length);
    const j = random.below(segments.length);
    const choice = random.below(4);
    if (choice === 0) {
      [segments[i], segments[j]] = [segments[j], segments[i]];
      return [segments.join('.'), `swap segments ${i} and ${j}`];
    }
    if (choice === 1) {
      segments.splice(i, 1);
      return [segments.join('.'), `drop segment ${i}`];
    }
    if (choice === 2) {
      segments.splice(i, 0, segments[i]);
      return [segments.join('.'), `duplicate segment ${i}`];
    }
    segments[i] = '';
    return [segments.join('.'), `empty segment ${i}`];
  },
  (random, text, maxLength) => {
    if (random.chance(0.5) && text.length > 0) {
      const times = Math.max(2, Math.floor(maxLength / Math.max(1, text.length)));
      return [text.repeat(random.between(2, times)).slice(0, maxLength), 'repeat'];
    }
    const length = random.between(text.length, maxLength);
    return [text.padEnd(length, random.pick(['A', '.', ' ', 'é'])), `pad to ${length}`];
  },
  (random, text) => {
    const at = random.below(text.length);
    const code = text.charCodeAt(at);
    const escaped = Number.isNaN(code) ? '%' : `%${code.toString(16).padStart(2, '0')}`;
    return [`${text.slice(0, at)}${escaped}${text.slice(at + 1)}`, `percent-encode char ${at}`];
  },
  (random) => {
    const classic = random.pick(CLASSIC_TEXT);
    return [classic, `replace with ${JSON.stringify(classic)}`];
  },
];

/** One to three mutations of `text`; the result is at most about `maxLength` long. */
export function mutateText(
  random: Random,
  text: string,
  options: { maxLength?: number } = {},
): FuzzCase<string> {
  const maxLength = options.maxLength ?? 10_000;
  const rounds = random.chance(0.7) ? 1 : random.chance(0.66) ? 2 : 3;
  let current = text;
  const steps: string[] = [];
  for (let round = 0; round < rounds; round++) {
    const [next, step] = random.pick(TEXT_MUTATIONS)(random, current, maxLength);
    current = next;
    steps.push(step);
  }
  return { input: current, how: steps.join('; ') };
}

/** Alphabets of {@link randomText}. */
export type TextAlphabet = 'base64url' | 'compact' | 'ascii' | 'latin1' | 'unicode';

function randomCharacter(random: Random, alphabet: TextAlphabet): string {
  switch (alphabet) {
    case 'base64url':
      return BASE64URL[random.below(64)];
    case 'compact':
      return random.chance(0.05) ? '.' : BASE64URL[random.below(64)];
    case 'ascii':
      return String.fromCharCode(random.below(128));
    case 'latin1':
      return String.fromCharCode(random.between(0x20, 0xff));
    case 'unicode':
      return random.chance(0.2)
        ? random.pick(CHARACTERS)
        : String.fromCharCode(random.below(0x10000));
  }
}

/** Random text of 0..maxLength characters from `alphabet`. */
export function randomText(random: Random, maxLength: number, alphabet: TextAlphabet): string {
  const length = random.chance(0.8) ? random.below(Math.min(maxLength, 300) + 1) : random.below(
    maxLength + 1,
  );
  let text = '';
  for (let i = 0; i < length; i++) text += randomCharacter(random, alphabet);
  return text;
}

/** `n` random bytes. */
export function randomBytes(random: Random, n: number): Uint8Array {
  const bytes = new Uint8Array(n);
  for (let i = 0; i < n; i++) bytes[i] = random.below(256);
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// JSON documents

/** JSON text emitted as written (numbers JSON.stringify cannot write, deep nesting, escapes). */
export class RawJson {
  constructor(readonly text: string) {}
}

/** An object written member by member: a key may repeat, `__proto__` stays a member. */
export class JsonMembers {
  constructor(readonly members: readonly (readonly [string, unknown])[]) {}
}

/** JSON text of a tree that may hold {@link RawJson} and {@link JsonMembers} nodes. */
export function jsonText(value: unknown): string {
  if (value instanceof RawJson) return value.text;
  if (value instanceof JsonMembers) {
    return `{${
      value.members.map(([key, member]) => `${JSON.stringify(key)}:${jsonText(member)}`).join(',')
    }}`;
  }
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'number') {
    if (Object.is(value, -0)) return '-0';
    return Number.isFinite(value) ? String(value) : 'null';
  }
  if (typeof value === 'boolean' || typeof value === 'string') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(jsonText).join(',')}]`;
  const record = value as Record<string, unknown>;
  return `{${
    Object.keys(record).map((key) => `${JSON.stringify(key)}:${jsonText(record[key])}`).join(',')
  }}`;
}

type Path = (string | number)[];

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) &&
    !(value instanceof RawJson) && !(value instanceof JsonMembers);
}

/** Every node of a plain JSON tree by path (the root first), at most `limit` of them. */
export function jsonPaths(value: unknown, limit = 500): Path[] {
  const paths: Path[] = [];
  const visit = (node: unknown, path: Path): void => {
    if (paths.length >= limit) return;
    paths.push(path);
    if (Array.isArray(node)) node.forEach((item, index) => visit(item, [...path, index]));
    else if (isRecord(node)) {
      for (const key of Object.keys(node)) {
        visit(node[key], [...path, key]);
      }
    }
  };
  visit(value, []);
  return paths;
}

function valueAt(root: unknown, path: Path): unknown {
  let node = root;
  for (const step of path) node = (node as Record<string | number, unknown>)[step];
  return node;
}

/** A copy of `root` with the node at `path` replaced (or removed when `remove`). */
function replacedAt(root: unknown, path: Path, replacement: unknown, remove = false): unknown {
  if (path.length === 0) return replacement;
  const [step, ...rest] = path;
  if (Array.isArray(root)) {
    const copy = [...root];
    if (rest.length === 0 && remove) copy.splice(step as number, 1);
    else copy[step as number] = replacedAt(root[step as number], rest, replacement, remove);
    return copy;
  }
  const record = root as Record<string, unknown>;
  const members: [string, unknown][] = [];
  for (const key of Object.keys(record)) {
    if (key !== step) members.push([key, record[key]]);
    else if (rest.length > 0 || !remove) {
      members.push([key, replacedAt(record[key], rest, replacement, remove)]);
    }
  }
  return asObject(members);
}

/** A plain object when the keys allow it (own `__proto__` needs {@link JsonMembers}). */
function asObject(members: [string, unknown][]): unknown {
  if (members.some(([key]) => key === '__proto__')) return new JsonMembers(members);
  const record: Record<string, unknown> = {};
  for (const [key, member] of members) record[key] = member;
  return record;
}

/** Options of the JSON mutations. */
export interface JsonMutationOptions {
  /** Longest generated string or array (characters / items); default 5000. */
  maxLength?: number;
  /** Deepest generated nesting; default 2000. */
  maxDepth?: number;
}

function deepNesting(random: Random, maxDepth: number): [RawJson, string] {
  const depth = random.between(Math.min(32, maxDepth), maxDepth);
  return random.chance(0.5)
    ? [new RawJson(`${'['.repeat(depth)}${']'.repeat(depth)}`), `${depth} nested arrays`]
    : [new RawJson(`${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`), `${depth} nested objects`];
}

function escapedEveryCharacter(text: string): RawJson {
  let escaped = '"';
  for (let i = 0; i < text.length; i++) {
    escaped += `\\u${text.charCodeAt(i).toString(16).padStart(4, '0')}`;
  }
  return new RawJson(`${escaped}"`);
}

/** A hostile replacement for `old`: a wrong type, an edge number, a look-alike, a huge value. */
function hostileValue(
  random: Random,
  old: unknown,
  options: Required<JsonMutationOptions>,
): [unknown, string] {
  const choice = random.below(10);
  if (choice === 0) {
    const value = random.pick<unknown>([null, true, false, [], {}, '', 0, 1, -1, 0.5, 'x']);
    return [value, `wrong type ${jsonText(value)}`];
  }
  if (choice === 1) {
    const raw = random.pick([
      '-0',
      '1e308',
      '-1e308',
      '1e999',
      '-1e999',
      '1E-400',
      '9007199254740991',
      '9007199254740992',
      '9007199254740993',
      '123456789012345678901234567890',
      '0.1e1',
      '4294967296',
      '-2147483649',
      '1.0',
    ]);
    return [new RawJson(raw), `number ${raw}`];
  }
  if (choice === 2) {
    const text = random.pick(CLASSIC_TEXT);
    return [text, `string ${JSON.stringify(text)}`];
  }
  if (choice === 3) {
    const raw = random.pick([
      '"\\u0000"',
      '"\\ud800"',
      '"\\udfff\\ud800"',
      '"\\u202e\\u0041"',
      '"\\ud83d\\ude00"',
      '"\\"\\\\\\/\\b\\f\\n\\r\\t"',
    ]);
    return [new RawJson(raw), `escapes ${raw}`];
  }
  if (choice === 4) {
    const [nested, how] = deepNesting(random, options.maxDepth);
    return [nested, how];
  }
  if (choice === 5) {
    const length = random.between(256, options.maxLength);
    return random.chance(0.5)
      ? ['A'.repeat(length), `string of ${length}`]
      : [Array.from({ length: Math.min(length, 2000) }, () => old ?? 0), `array of ${length}`];
  }
  if (choice === 6) {
    const wrapped = random.pick<[unknown, string]>([
      [[old], 'wrapped in an array'],
      [{ value: old }, 'wrapped in an object'],
      [{ '0': old }, 'as {"0": value}'],
      [[old, old], 'doubled in an array'],
    ]);
    return wrapped;
  }
  if (choice === 7) {
    return [
      new JsonMembers([['__proto__', { polluted: true }], ['constructor', {
        prototype: { polluted: true },
      }]]),
      'object with __proto__ and constructor members',
    ];
  }
  // Tweaks of the old value itself.
  if (typeof old === 'string') {
    const tweak = random.below(5);
    if (tweak === 0) return [escapedEveryCharacter(old), 'the same string, every char escaped'];
    if (tweak === 1) return [`${old} `, 'trailing space'];
    if (tweak === 2) return [`${old}\u0000`, 'trailing NUL'];
    if (tweak === 3) return [old.toUpperCase(), 'upper case'];
    const mutated = mutateText(random, old, { maxLength: options.maxLength });
    return [mutated.input, `text: ${mutated.how}`];
  }
  if (typeof old === 'number') {
    const value = random.pick([old + 1, old - 1, -old, old * 1000, old + 0.5, 0]);
    return random.chance(0.2) ? [String(old), 'number as string'] : [value, `number ${value}`];
  }
  if (typeof old === 'boolean') return [random.chance(0.5) ? !old : String(old), 'boolean tweak'];
  if (Array.isArray(old)) {
    return random.chance(0.5)
      ? [[...old, ...old], 'items doubled']
      : [old.slice(1), 'first dropped'];
  }
  return [null, 'null'];
}

const ADDED_KEYS = [
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
  '',
  ' ',
  'ｋｉｄ',
  'x-extra',
  'jku',
  'jwk',
  'crit',
  'subject',
  'act',
  'cnf',
];

/** One structural mutation of a plain JSON tree. */
function mutateTree(
  random: Random,
  root: unknown,
  options: Required<JsonMutationOptions>,
): [unknown, string] {
  const paths = jsonPaths(root);
  const path = random.pick(paths);
  const node = valueAt(root, path);
  const where = path.length === 0 ? 'the root' : path.map((step) => JSON.stringify(step)).join('.');
  const choice = random.below(10);
  if (choice < 5 || path.length === 0 && !isRecord(node)) {
    const [replacement, how] = hostileValue(random, node, options);
    return [replacedAt(root, path, replacement), `${where}: ${how}`];
  }
  if (choice < 7 && path.length > 0) {
    return [replacedAt(root, path, undefined, true), `${where}: removed`];
  }
  if (isRecord(node)) {
    const keys = Object.keys(node);
    const duplicate = keys.length > 0 && random.chance(0.4);
    const key = duplicate ? random.pick(keys) : random.pick([
      ...ADDED_KEYS,
      ...keys.map((existing) => existing.toUpperCase()),
      ...keys.map((existing) => `${existing} `),
    ]);
    const [value, how] = random.chance(0.5)
      ? hostileValue(random, node[key], options)
      : [random.chance(0.5) && keys.length > 0 ? node[random.pick(keys)] : 'x', 'a sibling value'];
    const members: [string, unknown][] = keys.map((existing) => [existing, node[existing]]);
    if (random.chance(0.5)) members.push([key, value]);
    else members.unshift([key, value]);
    return [
      replacedAt(root, path, new JsonMembers(members)),
      `${where}: ${duplicate ? 'duplicate' : 'add'} member ${JSON.stringify(key)} (${how})`,
    ];
  }
  const [replacement, how] = hostileValue(random, node, options);
  return [replacedAt(root, path, replacement), `${where}: ${how}`];
}

/** Positions in JSON text outside string literals, and letters inside them. */
function textPositions(text: string): { outside: number[]; letters: number[] } {
  const outside: number[] = [];
  const letters: number[] = [];
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const character = text[i];
    if (inString) {
      if (character === '\\') i++;
      else if (character === '"') inString = false;
      else if (/[A-Za-z]/.test(character)) letters.push(i);
    } else {
      outside.push(i);
      if (character === '"') inString = true;
    }
  }
  outside.push(text.length);
  return { outside, letters };
}

/** A mutation of JSON text: mostly meaning-preserving re-spellings, sometimes breakage. */
function mutateJsonSpelling(random: Random, text: string): [string, string] {
  const { outside, letters } = textPositions(text);
  const choice = random.below(8);
  if (choice === 0 && letters.length > 0) {
    const at = random.pick(letters);
    const escape = `\\u${text.charCodeAt(at).toString(16).padStart(4, '0')}`;
    return [`${text.slice(0, at)}${escape}${text.slice(at + 1)}`, `escape char ${at}`];
  }
  if (choice <= 1) {
    const at = random.pick(outside);
    const space = random.pick([' ', '\n', '\t', '\r', '\u00a0', '\u2028', '\ufeff']);
    return [`${text.slice(0, at)}${space}${text.slice(at)}`, `${JSON.stringify(space)} at ${at}`];
  }
  if (choice === 2) return [`\ufeff${text}`, 'BOM'];
  if (choice === 3) {
    const close = outside.filter((at) => text[at] === '}' || text[at] === ']');
    if (close.length > 0) {
      const at = random.pick(close);
      return [`${text.slice(0, at)},${text.slice(at)}`, `trailing comma at ${at}`];
    }
  }
  if (choice === 4) {
    return [`${text}${random.pick(['x', '{}', ' 1', '//', '/**/'])}`, 'garbage after'];
  }
  if (choice === 5) return [`/* c */${text}`, 'comment before'];
  const mutated = mutateText(random, text);
  return [mutated.input, mutated.how];
}

/**
 * A mutated document as JSON text: one to three structural mutations of the tree (wrong types,
 * removed or duplicated members, `__proto__`, deep nesting, huge values), then sometimes a
 * re-spelling or a break of the text itself.
 */
export function mutateJson(
  random: Random,
  value: unknown,
  options: JsonMutationOptions = {},
): FuzzCase<string> {
  const resolved = { maxLength: options.maxLength ?? 5000, maxDepth: options.maxDepth ?? 2000 };
  const steps: string[] = [];
  let tree = value;
  const rounds = random.chance(0.6) ? 1 : random.chance(0.6) ? 2 : 3;
  for (let round = 0; round < rounds; round++) {
    const [next, how] = mutateTree(random, tree, resolved);
    tree = next;
    steps.push(how);
    // Nodes written as raw text or members are leaves from here on.
    if (tree instanceof RawJson || tree instanceof JsonMembers) break;
  }
  let text = jsonText(tree);
  if (random.chance(0.25)) {
    const [spelled, how] = mutateJsonSpelling(random, text);
    text = spelled;
    steps.push(how);
  }
  return { input: text, how: steps.join('; ') };
}

const INVALID_UTF8 = [
  [0xc3, 0x28],
  [0xed, 0xa0, 0x80],
  [0xff],
  [0xc0, 0xaf],
  [0xf4, 0x90, 0x80, 0x80],
  [0xe2, 0x82],
];

/** {@link mutateJson} as UTF-8 bytes, sometimes with invalid UTF-8 or a flipped byte. */
export function mutateJsonBytes(
  random: Random,
  value: unknown,
  options: JsonMutationOptions = {},
): FuzzCase<Uint8Array> {
  const { input, how } = mutateJson(random, value, options);
  const bytes = new TextEncoder().encode(input);
  if (random.chance(0.7)) return { input: bytes, how };
  const at = random.below(bytes.length + 1);
  if (random.chance(0.5)) {
    const invalid = random.pick(INVALID_UTF8);
    const out = new Uint8Array(bytes.length + invalid.length);
    out.set(bytes.subarray(0, at));
    out.set(invalid, at);
    out.set(bytes.subarray(at), at + invalid.length);
    return { input: out, how: `${how}; invalid UTF-8 ${JSON.stringify(invalid)} at ${at}` };
  }
  const out = bytes.slice();
  const index = Math.min(at, out.length - 1);
  if (index >= 0) out[index] ^= 1 << random.below(8);
  return { input: out, how: `${how}; flip a bit of byte ${index}` };
}

/** Every path of `value` given each JSON type it does not have, and removed: a fixed grid. */
export function typeConfusionCases(value: unknown): FuzzCase<string>[] {
  const samples: [string, unknown][] = [
    ['null', null],
    ['boolean', true],
    ['number', 1],
    ['string', 'x'],
    ['array', []],
    ['object', {}],
  ];
  const typeOf = (node: unknown): string =>
    node === null ? 'null' : Array.isArray(node) ? 'array' : typeof node;
  const cases: FuzzCase<string>[] = [];
  for (const path of jsonPaths(value)) {
    const where = path.length === 0 ? 'the root' : path.join('.');
    const node = valueAt(value, path);
    for (const [type, sample] of samples) {
      if (type === typeOf(node)) continue;
      cases.push({ input: jsonText(replacedAt(value, path, sample)), how: `${where} as ${type}` });
    }
    if (path.length > 0) {
      cases.push({
        input: jsonText(replacedAt(value, path, undefined, true)),
        how: `${where} removed`,
      });
    }
  }
  return cases;
}

/** A random JSON document (objects may repeat keys or carry `__proto__`). */
export function randomJson(random: Random, depth = 3): unknown {
  const choice = random.below(depth <= 0 ? 5 : 8);
  if (choice === 0) return null;
  if (choice === 1) return random.chance(0.5);
  if (choice === 2) {
    return random.chance(0.5)
      ? random.between(-1000, 1000)
      : new RawJson(random.pick(['-0', '1e999', '1.5', '9007199254740993', '1e-7']));
  }
  if (choice <= 4) return randomText(random, 40, random.pick(['ascii', 'unicode'] as const));
  if (choice <= 5) {
    return Array.from({ length: random.below(5) }, () => randomJson(random, depth - 1));
  }
  const members: [string, unknown][] = [];
  for (let n = random.below(6); n > 0; n--) {
    const key = random.chance(0.3)
      ? random.pick(ADDED_KEYS)
      : randomText(random, 12, random.pick(['ascii', 'unicode'] as const));
    members.push([key, randomJson(random, depth - 1)]);
  }
  return new JsonMembers(members);
}

// ---------------------------------------------------------------------------------------------
// Signed compact forms

/** Bytes of base64url text, decoded as leniently as any decoder would (`undefined` if not). */
export function lenientBase64UrlBytes(text: string): Uint8Array | undefined {
  const cleaned = text.replace(/[\t\n\f\r ]/g, '').replace(/=+$/, '');
  if (!/^[A-Za-z0-9_-]*$/.test(cleaned) || cleaned.length % 4 === 1) return undefined;
  const padded = cleaned.replace(/-/g, '+').replace(/_/g, '/') +
    '='.repeat((4 - (cleaned.length % 4)) % 4);
  try {
    return Uint8Array.from(atob(padded), (character) => character.charCodeAt(0));
  } catch {
    return undefined;
  }
}

/**
 * Whether `candidate` carries exactly the signed bytes of the compact JWS `original`: the same
 * signing input (`header.payload`, the bytes the signature covers) and a signature segment that
 * decodes to the same bytes. Any other accepted mutation is a forgery.
 */
export function sameSignedBytes(original: string, candidate: string): boolean {
  const [header, payload, signature] = original.split('.');
  const parts = candidate.split('.');
  if (parts.length !== 3 || parts[0] !== header || parts[1] !== payload) return false;
  const expected = lenientBase64UrlBytes(signature);
  const received = lenientBase64UrlBytes(parts[2]);
  return expected !== undefined && received !== undefined &&
    expected.length === received.length && expected.every((byte, i) => byte === received[i]);
}

/** Bytes as hex (for comparing bodies). */
export function bytesHex(bytes: Uint8Array): string {
  let text = '';
  for (const byte of bytes) text += byte.toString(16).padStart(2, '0');
  return text;
}
