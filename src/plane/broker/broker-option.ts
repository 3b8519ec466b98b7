/**
 * The control plane's `rpc` option: `{}` mounts the broker at `/rpc`, `{ path }` elsewhere,
 * omitted or `false` leaves it unmounted.
 *
 * @module
 */
import { refuseUnknownKeys } from '../../core/config-values.ts';
import { SvcConfigurationError } from '../../core/errors.ts';
import { rpcPathProblem } from '../../service/identifiers.ts';

/** The `rpc` option of `createControlPlane`. */
export type BrokerOption = false | { path?: string };

/** The broker's default route. */
export const DEFAULT_BROKER_PATH = '/rpc';

function refuse(problem: string): never {
  throw new SvcConfigurationError(`createControlPlane: \`rpc\` ${problem}`, {
    reason: 'invalid_rpc_option',
  });
}

/**
 * The broker's route, or `undefined` when it is not mounted. Throws `SvcConfigurationError`
 * for anything but `false`, `undefined` or `{ path? }` with a path of the RPC-path shape that
 * does not shadow one of `reservedPaths`.
 */
export function resolveBrokerPath(
  value: unknown,
  reservedPaths: readonly string[],
): string | undefined {
  if (value === undefined || value === false) return undefined;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    refuse('must be false or an object { path? }');
  }
  refuseUnknownKeys(value, ['path'], 'createControlPlane: `rpc`', {
    reason: 'invalid_rpc_option',
  });
  const path = (value as { path?: unknown }).path ?? DEFAULT_BROKER_PATH;
  if (
    typeof path !== 'string' || (path !== DEFAULT_BROKER_PATH && rpcPathProblem(path) !== undefined)
  ) {
    refuse(
      `path must be an absolute path such as ${DEFAULT_BROKER_PATH} (got ${JSON.stringify(path)})`,
    );
  }
  if (reservedPaths.includes(path)) refuse(`path ${path} is a route of the plane itself`);
  return path;
}
