/**
 * The main object served at an ability's RPC path. Its only method, `authenticate(token, proof?)`,
 * verifies the capability token and returns the validating ability stub; every check that can
 * refuse a caller runs here, before any handler exists.
 *
 * @module
 */
import { RpcTarget } from 'capnweb';
import { CapabilityAuthError } from '../core/errors.ts';
import {
  type CapabilityTokenClaims,
  recheckVerifiedToken,
  verifyCapabilityClaims,
  type VerifyCapabilityTokenOptions,
} from '../core/capability-token.ts';
import type { VerifiedIdentity } from '../core/identity.ts';
import type { SvcLogEvent } from '../core/logging.ts';
import type { AbilityDefinition } from './ability.ts';
import type { AbilityCallContext } from './ability-call.ts';
import { createAbilityTarget } from './ability-target.ts';
import type { InboundRpcMetadata } from './inbound-metadata.ts';
import { verifyCapabilityProof } from './proof-verify.ts';
import { ResourceOutputs } from './resource-outputs.ts';
import { BATCH_SESSION_DISPOSES_NOTHING } from './rpc-serve.ts';
import { confirmedIdentityOf, verifiedIdentityOf } from './verified-identity.ts';
import { warnOfVerificationTrouble } from './verification-warnings.ts';
import type { ResolvedServiceOptions } from './service-options.ts';

/** Everything the gateway of one RPC request or WebSocket session knows. */
export interface GatewayContext {
  // deno-lint-ignore no-explicit-any
  ability: AbilityDefinition<any>;
  service: ResolvedServiceOptions;
  transport: 'http-batch' | 'websocket' | 'cloudflare-binding-rpc';
  metadata: InboundRpcMetadata;
  /** Epoch ms at which the caller's budget runs out; undefined when the caller sent none. */
  callerDeadlineEndsAt?: number;
  requestId?: string;
  /** Runtime access handed to handler factories (the request context). */
  context: unknown;
  log(event: SvcLogEvent): void;
  /** Told once a token was accepted (a session transport stops its authentication deadline). */
  onAuthenticated?(): void;
}

function refuse(status: 401 | 403, reason: string, message: string): never {
  throw new CapabilityAuthError(message, { status, reason });
}

/** Ingress: only a brokered token whose signed `spb` names the configured plane passes. */
function checkIngress(identity: VerifiedIdentity, brokerServiceId: string | undefined): void {
  if (brokerServiceId === undefined) return;
  if (identity.brokerServiceId !== brokerServiceId) {
    refuse(
      403,
      'ingress_required',
      'This service accepts only tokens brokered by its control plane',
    );
  }
}

/** Access class: `access: 'service'` abilities admit only callers the plane proved to be services. */
// deno-lint-ignore no-explicit-any
function checkAccessClass(identity: VerifiedIdentity, ability: AbilityDefinition<any>): void {
  if (ability.access === 'service' && identity.callerAccess !== 'service') {
    refuse(403, 'access_class_mismatch', `Ability ${ability.id} is restricted to service callers`);
  }
}

const verifyOptionsByService = new WeakMap<ResolvedServiceOptions, VerifyCapabilityTokenOptions>();

/** What a service verifies tokens against, built once per service. */
function verifyOptionsOf(service: ResolvedServiceOptions): VerifyCapabilityTokenOptions {
  let options = verifyOptionsByService.get(service);
  if (options === undefined) {
    options = { keys: service.keys, issuer: service.issuer, audience: service.id };
    verifyOptionsByService.set(service, options);
  }
  return options;
}

/** The RPC main object: `authenticate(token, proof?)` and nothing else. */
export class AbilityGateway extends RpcTarget {
  #context: GatewayContext;
  /** On an HTTP batch: whether an output held more than plain data. */
  #resourceOutputs: ResourceOutputs | undefined;

  constructor(context: GatewayContext) {
    super();
    this.#context = context;
    if (context.transport === 'http-batch') this.#resourceOutputs = new ResourceOutputs();
  }

  /**
   * Whether this batch's session has nothing to dispose: it exported this gateway and its
   * ability stubs (neither holds a resource) and outputs that were all plain data, none still
   * to come. A symbol member: no peer can call it.
   */
  [BATCH_SESSION_DISPOSES_NOTHING](): boolean {
    return this.#resourceOutputs?.allPlainData() === true;
  }

  /**
   * Verifies a capability token (and its proof of possession when the token is bound) and
   * returns the ability stub for this caller. A token this service verified before, not bound
   * to a key, is decided at once (every check run again, synchronously): its stub comes back
   * without a promise, so the calls pipelined on it in the same batch run without waiting.
   */
  authenticate(token: unknown, proof?: unknown): RpcTarget | Promise<RpcTarget> {
    const target = this.#authenticated(token, proof);
    // A stub still to come may carry calls whose outputs are not known yet.
    return this.#resourceOutputs === undefined ? target : this.#resourceOutputs.counted(target);
  }

  /** The ability stub for `token`: at once for a token verified before, else a promise. */
  #authenticated(token: unknown, proof: unknown): RpcTarget | Promise<RpcTarget> {
    const verifyOptions = verifyOptionsOf(this.#context.service);
    let claims: CapabilityTokenClaims | undefined;
    try {
      claims = typeof token === 'string' ? recheckVerifiedToken(token, verifyOptions) : undefined;
    } catch (error) {
      return Promise.reject(this.#warnedOf(error, token));
    }
    if (claims === undefined || claims.cnf !== undefined) {
      return this.#authenticateFully(token, proof, verifyOptions);
    }
    try {
      return this.#abilityTarget(token as string, this.#admitted(claims));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** The verification failure, after telling the operator what may be wrong on their side. */
  #warnedOf(error: unknown, token: unknown): unknown {
    warnOfVerificationTrouble(error, token, {
      issuer: this.#context.service.issuer,
      log: this.#context.log,
      ...(this.#context.requestId !== undefined ? { requestId: this.#context.requestId } : {}),
    });
    return error;
  }

  async #authenticateFully(
    token: unknown,
    proof: unknown,
    verifyOptions: VerifyCapabilityTokenOptions,
  ): Promise<RpcTarget> {
    const { service, ability } = this.#context;
    const claims = await verifyCapabilityClaims(token, verifyOptions).catch((error: unknown) => {
      throw this.#warnedOf(error, token);
    });
    const identity = this.#admitted(claims);
    if (claims.cnf === undefined) return this.#abilityTarget(token as string, identity);
    await verifyCapabilityProof(proof, {
      token: token as string,
      jkt: claims.cnf.jkt,
      audience: service.id,
      abilityId: ability.id,
    });
    return this.#abilityTarget(
      token as string,
      confirmedIdentityOf(claims as typeof claims & { cnf: { jkt: string } }),
    );
  }

  /** The identity of verified `claims`, once ingress and access class admit it. */
  #admitted(claims: CapabilityTokenClaims): VerifiedIdentity {
    // One frozen identity per verified token, shared by every request presenting it.
    const identity = verifiedIdentityOf(claims);
    checkIngress(identity, this.#context.service.brokerServiceId);
    checkAccessClass(identity, this.#context.ability);
    return identity;
  }

  /** The validating ability stub for an admitted caller. */
  #abilityTarget(token: string, identity: VerifiedIdentity): RpcTarget {
    const { ability, service, metadata, transport } = this.#context;
    const verifyOptions = verifyOptionsOf(service);
    // Forwarded connection info is advisory and only trusted on the brokered path.
    const connInfo = service.brokerServiceId !== undefined ? metadata.connInfo : undefined;
    this.#context.onAuthenticated?.();
    // Optional members are set one by one: spreading conditional objects copies each through a
    // generic, slow path on some engines (JavaScriptCore), on every request.
    const call: AbilityCallContext = {
      identity,
      context: this.#context.context,
      transport,
      log: this.#context.log,
    };
    if (connInfo !== undefined) call.connInfo = connInfo;
    if (this.#resourceOutputs !== undefined) call.resourceOutputs = this.#resourceOutputs;
    if (metadata.idempotencyKey !== undefined) call.idempotencyKey = metadata.idempotencyKey;
    if (this.#context.requestId !== undefined) call.requestId = this.#context.requestId;
    // A session transport outlives its authentication: each call checks again that the token
    // has not expired and that its key is still published (a verified-token cache hit, unless
    // the service's JWKS changed), so expiry and key revocation end what the token allowed.
    // An HTTP-batch authenticates with every request and needs no second look.
    if (transport !== 'http-batch') {
      call.recheckToken = () =>
        recheckVerifiedToken(token, verifyOptions) ?? verifyCapabilityClaims(token, verifyOptions);
    }
    if (this.#context.callerDeadlineEndsAt !== undefined) {
      call.callerDeadlineEndsAt = this.#context.callerDeadlineEndsAt;
    }
    if (service.methodCeilingMs !== undefined) {
      call.serviceMethodCeilingMs = service.methodCeilingMs;
    }
    return createAbilityTarget(ability, call);
  }
}
