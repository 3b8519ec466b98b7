/**
 * The one invocation path every front door (REST, MCP, the broker) and the in-process session
 * share: authorize from the catalog → mint the token the target needs → call over the endpoint's
 * transport with the request's metadata → the result or the typed error.
 *
 * Authorization runs before any token is minted or any service contacted, in this order: the
 * deadline has budget left (else `SvcTimeoutError` 504 `budget_exhausted`); the target is in the
 * catalog and its discovery succeeded (the catalog's own refusals); the ability exists (403
 * `unknown_ability`) and, for a front door, is published (a private ability is refused exactly
 * like a missing one: its existence is not disclosed); the method exists and is not streaming
 * when called as unary (403 `unknown_method`); a service-only ability refuses a non-service
 * caller (403 `access_class_mismatch`). Grants are checked by the issuer on every mint.
 *
 * The plane never retries: one invocation is at most one call to the service.
 *
 * @module
 */
import { type ConnInfo, serializeConnInfo } from '../core/conn-info.ts';
import { CapabilityAuthError, SvcInternalError, SvcTimeoutError } from '../core/errors.ts';
import { applyTimeoutPolicy, type TimeoutPolicy } from '../core/deadline.ts';
import type { SvcEventLog } from '../core/logging.ts';
import { abilitySession, disposeAbilitySession } from '../caller/ability-session.ts';
import type { AbilityDiscoveryEntry, MethodDiscoveryEntry } from '../service/discovery.ts';
import type { Catalog, ResolvedTarget } from './catalog.ts';
import { grantedScopes, publishedScopes } from './grants.ts';
import { type BrokerCaller, checkCatalogAccess, tokenShapeForCaller } from './broker-caller.ts';
import type { createIssuer, IssueCapabilityTokenOptions } from './issuer.ts';
import {
  createCapabilityTokenCache,
  normalizeRequestedScopes,
} from '../caller/token-request-cache.ts';
import { type SelectedTransport, selectTransport } from './target-transport.ts';
import { unaryCall, type UnaryCallRequest } from './unary-call.ts';
import type { ResolvedControlPlaneOptions } from './control-plane-options.ts';
import type { WithInvocationMiddleware } from './invocation-middleware.ts';

/** Who and what one front-door request is for; built by the door from the request. */
export interface InvocationContext {
  /** From `c.get('svcCaller')`, validated with `validateBrokerCaller`. */
  caller: BrokerCaller;
  /** From `c.get('svcConnInfo')`: only ever forwarded to the service, never put in a token. */
  connInfo?: ConnInfo;
  /** The plane request's id (an accepted `X-Request-Id`, or a generated one). */
  requestId: string;
  /**
   * Absolute epoch ms at which the caller's budget ends (see {@link invocationDeadline}); absent
   * when unbounded.
   */
  deadline?: number;
  /** Already filtered (word characters, `-`, `=`, at most 255), else absent. */
  idempotencyKey?: string;
  /** The runtime context (Hono's `c`): handed to `services(context)` and `signingKeys(env)`. */
  bindings: unknown;
  /** Aborted when the client went away: the upstream call or stream is cancelled. */
  signal?: AbortSignal;
}

/** One published method as the catalog describes it (identical for every caller). */
export interface PublishedMethod {
  serviceId: string;
  ability: AbilityDiscoveryEntry;
  methodName: string;
  method: MethodDiscoveryEntry;
}

/** What a door names to invoke; `method: ''` authorizes the whole ability (broker connect). */
export interface InvocationTarget {
  serviceId: string;
  abilityId: string;
  method: string;
}

/** Options of {@link Invocation.authorize}. */
export interface AuthorizeOptions {
  /**
   * Scopes the caller asks for (the broker's `connect`); default the ability's scopes plus the
   * method's (see {@link scopesForMethod}).
   */
  scopes?: readonly string[];
}

/** An invocation that passed the catalog checks; nothing was minted or contacted yet. */
export interface AuthorizedInvocation {
  /** The endpoint and its accepted document. */
  target: ResolvedTarget;
  ability: AbilityDiscoveryEntry;
  /** Absent when a whole ability was authorized (broker connect). */
  method?: MethodDiscoveryEntry;
  /** The scopes every token of this invocation asks for. */
  scopes: readonly string[];
  /** The transport the plane opens to the ability (chosen before anything is minted). */
  transport: SelectedTransport;
  /**
   * The token this caller needs for this target: delegated (`kind: 'user'`), service-class
   * (`kind: 'service'`), brokered when the target advertises ingress. A mint runs the grant
   * check; a minted token is reused for the same caller, subject, target, ability and scopes
   * for part of its life (Delegation r4), never across callers or subjects. `refusedToken`
   * (one the service refused with 401) is never handed back.
   */
  mintToken(refusedToken?: string): Promise<string>;
}

/** The invocation path built by {@link createInvocation}. */
export interface Invocation {
  /** Every published method of every target whose discovery succeeded (failures are logged by the catalog and left out). */
  publishedMethods(bindings: unknown, requestId: string): Promise<PublishedMethod[]>;
  /** Authorizes from the catalog (see the module documentation); nothing is minted yet. */
  authorize(
    target: InvocationTarget,
    ctx: InvocationContext,
    options?: AuthorizeOptions,
  ): Promise<AuthorizedInvocation>;
  /** A unary call through the whole path: the output, or the typed error. Never retried. */
  call(target: InvocationTarget, input: unknown, ctx: InvocationContext): Promise<unknown>;
  /** A streaming method: its item stream; cancelling it (or `ctx.signal`) ends the service's. */
  stream(
    target: InvocationTarget,
    input: unknown,
    ctx: InvocationContext,
  ): Promise<ReadableStream<unknown>>;
}

/** What the invocation path needs from the plane. */
export interface InvocationDependencies {
  planeServiceId: string;
  catalog: Catalog;
  issuer: ReturnType<typeof createIssuer>;
  timeoutPolicy: TimeoutPolicy;
  log: SvcEventLog;
}

/** What every front door's mount function receives from the plane. */
export interface FrontDoorDependencies {
  /** The shared invocation path. */
  invocation: Invocation;
  /** Runs the plane's `invocationMiddleware` around a door's handler. */
  withInvocationMiddleware: WithInvocationMiddleware;
  /** The plane's event log (`log: false` silences it). */
  log: SvcEventLog;
  /** `false` when the plane's `log` is `false`: events are discarded, so none need be built. */
  logging: boolean;
  /** The plane's resolved options. */
  options: ResolvedControlPlaneOptions;
  /** Paths of the plane's own routes, which no front-door route may shadow. */
  reservedPaths: readonly string[];
  /** The plane's catalog (read with the `default` purpose by the doors). */
  catalog: Catalog;
}

/** The token shape a caller maps to (`undefined`: the plane itself). */
export type TokenShape = ReturnType<typeof tokenShapeForCaller>;

/**
 * The absolute deadline of a front-door request: the caller's budget (a filtered
 * `X-Svc-Timeout`, measured from `arrivedAt`), else the plane's `timeout.defaultMs`, clamped by
 * `timeout.maxMs`; `undefined` when unbounded.
 */
export function invocationDeadline(
  budgetMs: number | undefined,
  policy: TimeoutPolicy,
  arrivedAt: number,
): number | undefined {
  const effective = applyTimeoutPolicy(budgetMs, policy, { perCallTransport: true });
  return effective === undefined ? undefined : arrivedAt + effective;
}

function budgetExhausted(what: string): SvcTimeoutError {
  return new SvcTimeoutError(`The budget for ${what} ran out before the call was made`, {
    reason: 'budget_exhausted',
  });
}

/** Milliseconds left before `deadline` (`undefined`: unbounded); throws once none are left. */
function remainingBudget(deadline: number | undefined, what: string): number | undefined {
  if (deadline === undefined) return undefined;
  const remaining = deadline - Date.now();
  if (remaining <= 0) throw budgetExhausted(what);
  return remaining;
}

/**
 * The scopes a front-door call of `method` asks for: the ability's plus the method's. A method
 * that requires none still needs a token naming at least one scope the grants allow (the grant
 * check is what admits the caller to the target at all): it then asks for every scope the
 * target publishes and grants to the acting service. The token reaches only the service.
 */
export function scopesForMethod(
  target: ResolvedTarget,
  ability: AbilityDiscoveryEntry,
  method: MethodDiscoveryEntry | undefined,
  actingServiceId: string,
): readonly string[] {
  const required = requiredScopes(ability, method);
  if (required.length > 0) return required;
  const published = publishedScopes(target.document);
  const granted = [...grantedScopes(target, actingServiceId)].filter((scope) =>
    published.has(scope)
  );
  if (granted.length === 0) {
    throw new CapabilityAuthError(
      `No scope of service "${target.endpoint.id}" is granted to caller "${actingServiceId}"`,
      { status: 403, reason: 'grant_denied' },
    );
  }
  return granted.sort();
}

/** The ability's scopes plus the method's, sorted; kept per entry of a frozen document. */
function requiredScopes(
  ability: AbilityDiscoveryEntry,
  method: MethodDiscoveryEntry | undefined,
): readonly string[] {
  const entry: object = method ?? ability;
  const kept = requiredScopesOf.get(entry);
  if (kept !== undefined) return kept;
  const scopes = Object.freeze([...new Set([...ability.scopes, ...(method?.scopes ?? [])])].sort());
  normalizedScopes.add(scopes);
  // A method entry belongs to one ability; an entry that may still change is not kept.
  if (Object.isFrozen(ability) && Object.isFrozen(entry)) requiredScopesOf.set(entry, scopes);
  return scopes;
}

const requiredScopesOf = new WeakMap<object, readonly string[]>();
/** Scope lists built sorted and without duplicates, which a token key takes as they are. */
const normalizedScopes = new WeakSet<readonly string[]>();

/** The ability of a resolved target, refused like a missing one when it must be published and is not. */
function abilityOf(target: ResolvedTarget, abilityId: string, published: boolean) {
  const ability = target.document.abilities.find((entry) => entry.id === abilityId);
  if (ability === undefined || (published && ability.exposure !== 'published')) {
    throw new CapabilityAuthError(`Unknown ability ${abilityId} on ${target.endpoint.id}`, {
      status: 403,
      reason: 'unknown_ability',
    });
  }
  return ability;
}

function methodOf(ability: AbilityDiscoveryEntry, name: string): MethodDiscoveryEntry {
  const method = Object.hasOwn(ability.methods, name) ? ability.methods[name] : undefined;
  if (method === undefined) {
    throw new CapabilityAuthError(`Unknown method ${name} of ${ability.id}`, {
      status: 403,
      reason: 'unknown_method',
    });
  }
  return method;
}

/**
 * Resolves the target, checks the ability and the caller's access class from the catalog, and
 * chooses the transport; shared by the in-process session (which may reach private abilities:
 * it is trusted code) and the front doors (which may not).
 */
export async function authorizeAbility(
  deps: Pick<InvocationDependencies, 'catalog'>,
  request: {
    serviceId: string;
    abilityId: string;
    shape: TokenShape;
    bindings: unknown;
    requestId?: string;
    published: boolean;
  },
): Promise<{ target: ResolvedTarget; ability: AbilityDiscoveryEntry }> {
  const target = peekTarget(deps, request.serviceId) ??
    await resolveTarget(deps, request.serviceId, request.bindings, request.requestId);
  return { target, ability: checkedAbility(target, request) };
}

/**
 * A call through the plane, not a token request: the `default` purpose's snapshot, read
 * without a promise when a process-local cache holds it.
 */
function peekTarget(
  deps: Pick<InvocationDependencies, 'catalog'>,
  serviceId: string,
): ResolvedTarget | undefined {
  return deps.catalog.peek(serviceId, 'default');
}

function resolveTarget(
  deps: Pick<InvocationDependencies, 'catalog'>,
  serviceId: string,
  bindings: unknown,
  requestId: string | undefined,
): Promise<ResolvedTarget> {
  return deps.catalog.target(serviceId, bindings, 'default', {
    ...(requestId !== undefined ? { requestId } : {}),
  });
}

/** The ability of a resolved target, after the ability and access-class checks. */
function checkedAbility(
  target: ResolvedTarget,
  request: { abilityId: string; shape: TokenShape; published: boolean },
): AbilityDiscoveryEntry {
  const ability = abilityOf(target, request.abilityId, request.published);
  checkCatalogAccess(target, request.abilityId, request.shape.callerAccess);
  return ability;
}

/** What one mint for a target names. */
interface MintRequest {
  shape: TokenShape;
  abilityId: string;
  scopes: readonly string[];
  bindings: unknown;
  requestId?: string;
}

function mintOptions(target: ResolvedTarget, request: MintRequest): IssueCapabilityTokenOptions {
  return {
    ...request.shape,
    targetServiceId: target.endpoint.id,
    scopes: request.scopes,
    abilityId: request.abilityId,
    context: request.bindings,
    ...(request.requestId !== undefined ? { requestId: request.requestId } : {}),
  };
}

/** Mints the token `shape` needs for `target` (brokered when the target advertises ingress). */
export async function mintForTarget(
  deps: Pick<InvocationDependencies, 'issuer'>,
  target: ResolvedTarget,
  request: MintRequest,
): Promise<string> {
  const brokered = target.document.ingress !== undefined;
  return (await deps.issuer.mintWithTarget(mintOptions(target, request), brokered, target)).token;
}

/**
 * A stream that ends `dispose` once it is done, failed or cancelled: the session it came from
 * stays open exactly as long as the stream does.
 */
function disposingWhenDone(
  stream: ReadableStream<unknown>,
  dispose: () => void,
): ReadableStream<unknown> {
  const reader = stream.getReader();
  return new ReadableStream<unknown>({
    async pull(controller) {
      try {
        const next = await reader.read();
        if (next.done) {
          controller.close();
          dispose();
        } else {
          controller.enqueue(next.value);
        }
      } catch (error) {
        controller.error(error);
        dispose();
      }
    },
    async cancel(reason) {
      try {
        await reader.cancel(reason);
      } finally {
        dispose();
      }
    },
  }, { highWaterMark: 0 });
}

/**
 * The cache key of a minted token: the contract's fields (Delegation r4: caller, target,
 * ability, normalised scopes, the complete subject with its kind) plus what the plane mints
 * differently for one such key: the access class and whether the token is brokered.
 */
function mintedTokenKey(
  shape: TokenShape,
  target: ResolvedTarget,
  abilityId: string,
  scopes: readonly string[],
): string {
  const subject = shape.subject;
  return JSON.stringify([
    shape.callerAccess,
    target.document.ingress !== undefined ? 'brokered' : 'direct',
    shape.callerServiceId,
    target.endpoint.id,
    abilityId,
    normalizedScopes.has(scopes) ? scopes : normalizeRequestedScopes(scopes),
    subject === undefined ? null : [subject.id, subject.kind ?? null, subject.orgId ?? null],
  ]);
}

/** Every published method of `targets`, in catalog order. */
export function publishedMethodsOf(targets: readonly ResolvedTarget[]): PublishedMethod[] {
  const published: PublishedMethod[] = [];
  for (const target of targets) {
    for (const ability of target.document.abilities) {
      if (ability.exposure !== 'published') continue;
      for (const [methodName, method] of Object.entries(ability.methods)) {
        published.push({ serviceId: target.endpoint.id, ability, methodName, method });
      }
    }
  }
  return published;
}

/** Builds the invocation path over the plane's catalog and issuer. */
export function createInvocation(deps: InvocationDependencies): Invocation {
  // Minting is an ES256 signature here and a verification at the service for every new token:
  // reusing one per key (see mintedTokenKey) makes a warm call cost neither.
  const minted = createCapabilityTokenCache();
  const authorize = async (
    target: InvocationTarget,
    ctx: InvocationContext,
    options: AuthorizeOptions = {},
  ): Promise<AuthorizedInvocation> => {
    const what = target.method === '' ? target.abilityId : `${target.abilityId}.${target.method}`;
    remainingBudget(ctx.deadline, what);
    const shape = tokenShapeForCaller(ctx.caller, deps.planeServiceId);
    const resolved = peekTarget(deps, target.serviceId) ??
      await resolveTarget(deps, target.serviceId, ctx.bindings, ctx.requestId);
    const ability = checkedAbility(resolved, {
      abilityId: target.abilityId,
      shape,
      published: true,
    });
    const method = target.method === '' ? undefined : methodOf(ability, target.method);
    const scopes = options.scopes !== undefined
      ? [...options.scopes]
      : scopesForMethod(resolved, ability, method, shape.callerServiceId);
    // Chosen before minting: an ability the plane cannot reach costs no token. A unary method
    // goes over HTTP-batch where offered (nothing stays open), a stream over a session.
    const transport = method === undefined
      ? selectTransport(resolved.endpoint, ability)
      : selectTransport(resolved.endpoint, ability, method.stream === true);
    const authorized: AuthorizedInvocation = {
      target: resolved,
      ability,
      scopes,
      transport,
      mintToken(refusedToken?: string) {
        const key = mintedTokenKey(shape, resolved, ability.id, scopes);
        if (refusedToken !== undefined) minted.forget(key, refusedToken);
        return minted.get(key, async () => {
          const issued = await deps.issuer.mintWithTarget(
            mintOptions(resolved, {
              shape,
              abilityId: ability.id,
              scopes,
              bindings: ctx.bindings,
              requestId: ctx.requestId,
            }),
            resolved.document.ingress !== undefined,
            resolved,
          );
          return { token: issued.token, lifetimeMs: issued.expiresAt.getTime() - Date.now() };
        });
      },
    };
    if (method !== undefined) authorized.method = method;
    return authorized;
  };

  /** Opens the caller-side session one invocation travels with (one call, or one stream). */
  const openSession = (
    authorized: AuthorizedInvocation,
    target: InvocationTarget,
    ctx: InvocationContext,
    timeoutMs: number | undefined,
  ) =>
    abilitySession({
      abilityId: authorized.ability.id,
      callerServiceId: tokenShapeForCaller(ctx.caller, deps.planeServiceId).callerServiceId,
      targetServiceId: target.serviceId,
      scopes: authorized.scopes,
      requestToken: ({ refusedToken }) => authorized.mintToken(refusedToken),
      transport: authorized.transport.transport,
      ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      ...(ctx.idempotencyKey !== undefined ? { idempotencyKey: ctx.idempotencyKey } : {}),
      requestId: ctx.requestId,
      ...(ctx.connInfo !== undefined ? { connInfo: serializeConnInfo(ctx.connInfo) } : {}),
    });

  return {
    async publishedMethods(bindings, requestId) {
      const { targets, failures } = await deps.catalog.all(bindings, 'default', { requestId });
      // Not one target resolved: there is no catalog to project, and an empty one would read
      // as "nothing published" (Catalog rules: fail closed).
      if (targets.length === 0 && failures.length > 0) {
        throw new SvcInternalError('No service of the catalog could be resolved', {
          reason: 'catalog_unavailable',
        });
      }
      return publishedMethodsOf(targets);
    },
    authorize,
    async call(target, input, ctx) {
      const authorized = await authorize(target, ctx);
      if (authorized.method?.stream === true) {
        throw new CapabilityAuthError(
          `${target.abilityId}.${target.method} is a streaming method`,
          {
            status: 403,
            reason: 'unknown_method',
          },
        );
      }
      remainingBudget(ctx.deadline, `${target.abilityId}.${target.method}`);
      // Optional members assigned, not spread: this runs for every front-door call.
      const metadata: UnaryCallRequest['metadata'] = { requestId: ctx.requestId };
      if (ctx.idempotencyKey !== undefined) metadata.idempotencyKey = ctx.idempotencyKey;
      if (ctx.connInfo !== undefined) metadata.connInfo = serializeConnInfo(ctx.connInfo);
      const request: UnaryCallRequest = {
        transport: authorized.transport.transport,
        abilityId: authorized.ability.id,
        method: target.method,
        input,
        metadata,
        token: authorized.mintToken,
      };
      if (ctx.deadline !== undefined) request.deadline = ctx.deadline;
      if (ctx.signal !== undefined) request.signal = ctx.signal;
      return await unaryCall(request);
    },
    async stream(target, input, ctx) {
      const authorized = await authorize(target, ctx);
      const timeoutMs = remainingBudget(ctx.deadline, `${target.abilityId}.${target.method}`);
      const session = openSession(authorized, target, ctx, timeoutMs);
      const dispose = () => {
        ctx.signal?.removeEventListener('abort', dispose);
        disposeAbilitySession(session);
      };
      ctx.signal?.addEventListener('abort', dispose, { once: true });
      try {
        const result = await (session as Record<string, (input: unknown) => Promise<unknown>>)[
          target.method
        ](input);
        if (!(result instanceof ReadableStream)) {
          dispose();
          throw new CapabilityAuthError(
            `${target.abilityId}.${target.method} is not a streaming method`,
            { status: 403, reason: 'unknown_method' },
          );
        }
        return disposingWhenDone(result, dispose);
      } catch (error) {
        dispose();
        throw error;
      }
    },
  };
}
