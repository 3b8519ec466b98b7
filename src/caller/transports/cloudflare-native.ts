/**
 * Placeholder for the Workers native-binding transport (`connectAbility` over a service
 * binding's JS RPC). It is part of the public surface so code can be written against it, and it
 * refuses loudly until it exists.
 *
 * @module
 */
import { SvcConfigurationError } from '../../core/errors.ts';
import type { RpcTransportFactory } from './outbound-metadata.ts';

/**
 * Native Workers RPC transport. Not built yet: always throws `SvcConfigurationError` pointing
 * at the transports that work today.
 */
export function cloudflareNativeRpc(_binding: unknown): RpcTransportFactory {
  throw new SvcConfigurationError(
    'cloudflareNativeRpc is not built yet: use cloudflareServiceBindingRpc or websocketRpc',
    { reason: 'not_built_yet' },
  );
}
