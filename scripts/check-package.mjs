/**
 * Checks the built package (`dist/`, after `npm run build`) the way an installing project meets
 * it: every path `exports` names exists, every `bin` exists and starts with its shebang, and every module the built code or its type declarations
 * import is either a `node:` built-in or a package this one lists in `dependencies`. A
 * devDependency imported from a published `.d.ts` turns the consumer's types into `unknown`
 * without any error here, so this is checked, not assumed.
 *
 * Exits non-zero, naming each problem, when the package would break for its users.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const dependencies = new Set(Object.keys(manifest.dependencies ?? {}));
const problems = [];

function filesUnder(directory) {
  return readdirSync(directory).flatMap((name) => {
    const path = join(directory, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

/** `@scope/name/sub` → `@scope/name`; `name/sub` → `name`. */
function packageName(specifier) {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

// Static imports, re-exports, side-effect imports and dynamic imports with a literal specifier.
const IMPORT_PATTERN = /(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)['"]([^'"\s]+)['"]/g;

function checkExports() {
  for (const [subpath, targets] of Object.entries(manifest.exports ?? {})) {
    for (const [condition, target] of Object.entries(targets)) {
      try {
        statSync(join(root, target));
      } catch {
        problems.push(`exports["${subpath}"].${condition}: ${target} was not built`);
      }
    }
  }
}

/** Each `bin` was built, and starts with the shebang that lets `npx` run it. */
function checkBins() {
  const bins = typeof manifest.bin === 'string' ? { [manifest.name]: manifest.bin } : manifest.bin;
  for (const [name, target] of Object.entries(bins ?? {})) {
    let text;
    try {
      text = readFileSync(join(root, target), 'utf8');
    } catch {
      problems.push(`bin["${name}"]: ${target} was not built`);
      continue;
    }
    if (!text.startsWith('#!/usr/bin/env node\n')) {
      problems.push(`bin["${name}"]: ${target} does not start with #!/usr/bin/env node`);
    }
  }
}

function checkImports() {
  const built = filesUnder(join(root, 'dist')).filter((path) => /\.(?:js|d\.ts)$/.test(path));
  if (built.length === 0) problems.push('dist/ holds no built files: run `npm run build` first');
  for (const path of built) {
    for (const [, specifier] of readFileSync(path, 'utf8').matchAll(IMPORT_PATTERN)) {
      if (specifier.startsWith('.') || specifier.startsWith('node:')) continue;
      // Only Workers provides it, at run time; the Workers adapter imports it lazily.
      if (specifier === 'cloudflare:workers') continue;
      if (!dependencies.has(packageName(specifier))) {
        problems.push(
          `${relative(root, path)} imports "${specifier}", which is not in dependencies` +
            (/^[a-z_]+$/.test(specifier) ? ' (a Node built-in must be imported as node:…)' : ''),
        );
      }
    }
  }
  return built.length;
}

checkExports();
checkBins();
const count = checkImports();
if (problems.length > 0) {
  console.error(`package check: ${problems.length} problem(s)\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log(`package check: ${count} built files import only dependencies and node: built-ins`);
