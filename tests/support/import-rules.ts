/**
 * The layout rules of `src/` as a checker over file texts (no file system here, so the rules
 * themselves are tested on every runtime): imports run one way, `core` ← `service` ← `caller` ←
 * `plane` ← `adapters`, with `cli` on top and `testing` free to use any; runtime APIs (`node:*`,
 * `Deno.*`, `Bun.*`) only in `adapters` and `cli`; and no import circle, type-only imports
 * included.
 */

/** The rooms of `src/`, lowest first: a room may import from its own and the ones below. */
export const LAYERS: readonly string[] = ['core', 'service', 'caller', 'plane', 'adapters', 'cli'];

/** Rooms whose code may use a runtime's own API. */
const RUNTIME_ROOMS: ReadonlySet<string> = new Set(['adapters', 'cli']);

/** One import of one file, as written. */
export interface FileImport {
  specifier: string;
  /** Whether it imports only types (`import type`, `export type`). */
  typeOnly: boolean;
}

// Comments may mention `Deno.upgradeWebSocket` or show an import; only code counts. Strings are
// kept whole so a `//` inside a URL is not read as a comment.
function withoutComments(text: string): string {
  return text.replace(
    /('(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|`(?:[^`\\]|\\.)*`)|\/\*[\s\S]*?\*\/|\/\/[^\n]*/g,
    (match, quoted: string | undefined) => quoted ?? match.replace(/[^\n]/g, ' '),
  );
}

/** Every static, re-exporting and dynamic import of a TypeScript source text. */
export function importsOf(text: string): FileImport[] {
  const code = withoutComments(text);
  const found: FileImport[] = [];
  const fromClause =
    /(?:^|[;\n])\s*(import|export)\s+(type\s+)?(?:[\w$*{}\s,]+?\s+from\s+)?['"]([^'"\n]+)['"]/g;
  for (const match of code.matchAll(fromClause)) {
    found.push({ specifier: match[3], typeOnly: match[2] !== undefined });
  }
  for (const match of code.matchAll(/\bimport\s*\(\s*['"]([^'"\n]+)['"]\s*\)/g)) {
    found.push({ specifier: match[1], typeOnly: false });
  }
  return found;
}

/** The room of a path below `src/` (`service/ability.ts` is in `service`). */
export function roomOf(path: string): string {
  return path.split('/')[0];
}

/** `from` resolved against the folder of `file`, both relative to `src/`; `..` past it kept. */
export function resolveImport(file: string, specifier: string): string {
  const parts = file.split('/').slice(0, -1);
  for (const segment of specifier.split('/')) {
    if (segment === '.' || segment === '') continue;
    if (segment === '..' && parts.length > 0 && parts[parts.length - 1] !== '..') parts.pop();
    else parts.push(segment);
  }
  return parts.join('/');
}

/** Each way a file's imports or runtime use break the layout, one message per finding. */
export function directionProblems(files: ReadonlyMap<string, string>): string[] {
  const problems: string[] = [];
  for (const [file, text] of files) {
    const room = roomOf(file);
    const rank = LAYERS.indexOf(room);
    for (const { specifier } of importsOf(text)) {
      if (specifier.startsWith('node:') && !RUNTIME_ROOMS.has(room)) {
        problems.push(
          `src/${file} imports ${specifier}: runtime modules belong in adapters or cli`,
        );
      }
      if (!specifier.startsWith('.')) continue;
      const target = resolveImport(file, specifier);
      if (target.startsWith('..')) {
        problems.push(`src/${file} imports ${specifier}: outside src/`);
        continue;
      }
      const targetRoom = roomOf(target);
      if (room === 'testing' || targetRoom === room) continue;
      if (targetRoom === 'testing') {
        problems.push(`src/${file} imports ${specifier}: only tests use src/testing`);
        continue;
      }
      const targetRank = LAYERS.indexOf(targetRoom);
      if (rank === -1 || targetRank === -1) {
        problems.push(
          `src/${file} imports ${specifier}: src/${room} or src/${targetRoom} is no room`,
        );
      } else if (targetRank > rank) {
        problems.push(
          `src/${file} imports ${specifier}: ${room} may not import ${targetRoom} ` +
            `(imports run ${LAYERS.join(' <- ')})`,
        );
      }
    }
    if (!RUNTIME_ROOMS.has(room)) {
      for (const match of withoutComments(text).matchAll(/\b(Deno|Bun)\.[A-Za-z]/g)) {
        problems.push(`src/${file} uses ${match[1]}.*: runtime APIs belong in adapters or cli`);
      }
    }
  }
  return problems;
}

/**
 * The import circles among `files` (relative imports only, type-only ones included), each
 * written as the path that closes it: `a.ts -> b.ts -> a.ts`. One circle per strongly connected
 * group of files, so a tangle is reported once rather than once per loop through it.
 */
export function importCircles(files: ReadonlyMap<string, string>): string[] {
  const edges = new Map<string, string[]>();
  for (const [file, text] of files) {
    const targets = importsOf(text)
      .filter(({ specifier }) => specifier.startsWith('.'))
      .map(({ specifier }) => resolveImport(file, specifier))
      .filter((target) => files.has(target));
    edges.set(file, [...new Set(targets)].sort());
  }
  const circles: string[] = [];
  for (const group of stronglyConnected(edges)) {
    const first = group[0];
    const selfLoop = edges.get(first)?.includes(first) ?? false;
    if (group.length === 1 && !selfLoop) continue;
    const members = new Set(group);
    circles.push(
      [...pathBack(first, edges, members), first].map((name) => `src/${name}`).join(' -> '),
    );
  }
  return circles;
}

/** Groups of files that all reach one another (Tarjan), each sorted, in a stable order. */
function stronglyConnected(edges: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  const visit = (file: string): void => {
    index.set(file, index.size);
    low.set(file, index.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const next of edges.get(file) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(file, Math.min(low.get(file)!, index.get(next)!));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const group: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      group.push(member);
    } while (member !== file);
    groups.push(group.sort());
  };
  for (const file of [...edges.keys()].sort()) if (!index.has(file)) visit(file);
  return groups.sort((a, b) => (a[0] < b[0] ? -1 : 1));
}

/** A shortest path of imports from `start` back to it, inside `members` (without the return). */
function pathBack(
  start: string,
  edges: ReadonlyMap<string, readonly string[]>,
  members: ReadonlySet<string>,
): string[] {
  const cameFrom = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const file = queue.shift()!;
    for (const next of edges.get(file) ?? []) {
      if (!members.has(next)) continue;
      if (next === start) {
        const path = [file];
        while (path[0] !== start) path.unshift(cameFrom.get(path[0])!);
        return path;
      }
      if (!cameFrom.has(next)) {
        cameFrom.set(next, file);
        queue.push(next);
      }
    }
  }
  return [start];
}
