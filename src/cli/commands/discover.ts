/**
 * `svcplane discover <service-url>`: what a service offers — its abilities, their methods,
 * scopes, transports and projections (REST route, MCP tool) — as a table, or its checked
 * discovery document with `--json`.
 *
 * @module
 */
import { parseArguments, positionals } from '../arguments.ts';
import { type CliOutput, table } from '../output.ts';
import { fetchServiceDocument } from './service-document.ts';

export const DISCOVER_USAGE = 'svcplane discover <service-url> [--json]';

/** Runs `discover`. */
export async function discover(args: readonly string[], output: CliOutput): Promise<number> {
  const parsed = parseArguments(args, {});
  const [serviceUrl] = positionals(parsed, 1, 1, DISCOVER_USAGE);
  const { document } = await fetchServiceDocument(serviceUrl);
  if (output.json) {
    output.data(document);
    return 0;
  }
  const ingress = document.ingress !== undefined
    ? `, ingress: brokered by ${document.ingress.brokerServiceId} only`
    : '';
  output.line(`${document.id}: ${document.title} ${document.version}${ingress}`);
  const rows: string[][] = [];
  for (const ability of document.abilities) {
    for (const [name, method] of Object.entries(ability.methods)) {
      const scopes = [...new Set([...ability.scopes, ...method.scopes])];
      rows.push([
        ability.id,
        name,
        method.stream === true ? 'stream' : 'call',
        scopes.join(','),
        ability.rpc.transports.join(','),
        method.rest !== undefined ? `${method.rest.method.toUpperCase()} ${method.rest.path}` : '',
        method.mcp?.name ?? '',
        `${ability.exposure}/${ability.access}`,
      ]);
    }
  }
  const header = ['ABILITY', 'METHOD', 'KIND', 'SCOPES', 'TRANSPORTS', 'REST', 'MCP', 'EXPOSURE'];
  for (const line of table(header, rows)) output.line(line);
  return 0;
}
