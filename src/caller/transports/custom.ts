/**
 * Any bidirectional Cap'n Web transport as a caller transport (a `MessagePort` pair, a test
 * harness, a bespoke socket). There is no channel for request metadata here: what a custom
 * transport propagates is up to the transport itself.
 *
 * @module
 */
import type { AnyRpcTransport } from 'capnweb';
import { SvcConfigurationError } from '../../core/errors.ts';
import { screenedTransport } from '../../service/peer-message-screen.ts';
import {
  type OpenedRpcSession,
  openSessionOver,
  type RpcTransportFactory,
} from './outbound-metadata.ts';

/**
 * Caller transport over a Cap'n Web transport. Pass a factory to open a fresh transport per
 * session; a single transport instance carries exactly one session, and opening a second one on
 * it is refused with `SvcConfigurationError`.
 */
export function customRpcTransport(
  transport: AnyRpcTransport | (() => AnyRpcTransport),
): RpcTransportFactory {
  let instanceUsed = false;
  const take = (): AnyRpcTransport => {
    if (typeof transport === 'function') return transport();
    if (instanceUsed) {
      throw new SvcConfigurationError(
        'customRpcTransport was given one transport instance, which carries one session: ' +
          'pass a factory to open several',
      );
    }
    instanceUsed = true;
    return transport;
  };
  return {
    kind: 'custom',
    open(): OpenedRpcSession {
      // The peer is whatever the transport reaches: its messages are screened like a service's.
      return openSessionOver(screenedTransport(take(), 'caller'));
    },
  };
}
