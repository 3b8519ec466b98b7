/**
 * The capability-token issuer: the full grant check on every mint, then one ES256 signature.
 *
 * Three entry points share one path: `issueCapabilityToken` (trusted plane code; requires
 * `callerAccess`; mints non-brokered tokens), `issueBrokeredCapabilityToken` (adds the signed
 * `spb` claim ingress-protected services require) and `issueCapabilityTokenForCaller` (a caller the
 * plane authenticated as a service; never accepts a subject).
 *
 * @module
 */
import {
  type CapabilityTokenClaims,
  compactCapabilityToken,
  startCapabilitySignature,
} from '../core/capability-token.ts';
import { refuseUnknownKeys } from '../core/config-values.ts';
import { CapabilityAuthError, SvcConfigurationError } from '../core/errors.ts';
import type { CallerAccess, DelegatedSubject } from '../core/identity.ts';
import { isPrincipalKindTooLong, MAX_PRINCIPAL_KIND_LENGTH } from '../core/token-claims.ts';
import type { createCatalog, ResolvedTarget } from './catalog.ts';
import { checkNormalizedGrant, normalizeScopes } from './grants.ts';
import type { SigningAuthority } from './signing-keys.ts';

/** Default lifetime of a capability token, in seconds. */
export const DEFAULT_CAPABILITY_TOKEN_TTL_SECONDS = 120;
/** Maximum lifetime of a capability token, in seconds; longer requests are capped. */
export const MAX_CAPABILITY_TOKEN_TTL_SECONDS = 3600;

/** What trusted plane code asks for when it mints a token directly. */
export interface IssueCapabilityTokenOptions {
  /** The calling service: `sub` on a plain token, `act.sub` on a delegated one. */
  callerServiceId: string;
  /** The service the token is for (`aud`); it must be in the plane's catalog. */
  targetServiceId: string;
  /**
   * Scopes asked for (at least one): each must be published by the target and granted to the
   * caller by the target's `grants`. Sorted and de-duplicated into the token's `scp`.
   */
  scopes: readonly string[];
  /** Required on every direct mint: who the plane vouches the caller is. */
  callerAccess: CallerAccess;
  /** A delegated principal; only with `callerAccess: 'plane'`. */
  subject?: DelegatedSubject;
  /** When given, the ability must exist on the target. */
  abilityId?: string;
  /**
   * Lifetime in seconds (a positive integer). Default, and ceiling: the plane's `ttlSeconds`
   * (`DEFAULT_CAPABILITY_TOKEN_TTL_SECONDS`, 120, unless set); a longer request gets that.
   */
  ttlSeconds?: number;
  /** Binds the token to a caller key (RFC 7638 thumbprint). */
  confirmationJkt?: string;
  /** Runtime context handed to `services(context)`. */
  context?: unknown;
  /** Propagated to the target's discovery request (when it is not cached) and its log events. */
  requestId?: string;
}

/** A minted token and what it grants. */
export interface IssuedCapabilityToken {
  /** The compact ES256 JWS to present to the target service. */
  token: string;
  /** When the token expires (`exp`). */
  expiresAt: Date;
  /** The granted scopes (`scp`): the requested ones, sorted and de-duplicated. */
  scopes: string[];
  /** The signed claim set. */
  claims: CapabilityTokenClaims;
}

type Catalog = ReturnType<typeof createCatalog>;

/** What the issuer needs from the plane. */
export interface IssuerDependencies {
  planeServiceId: string;
  issuer: string;
  defaultTtlSeconds: number;
  /** The signing authority; synchronous once a fixed key list is imported. */
  authority(context: unknown): SigningAuthority | Promise<SigningAuthority>;
  catalog: Catalog;
  now?: () => number;
}

/** Every key of {@link IssueCapabilityTokenOptions}. */
const ISSUE_OPTIONS: readonly string[] = [
  'callerServiceId',
  'targetServiceId',
  'scopes',
  'callerAccess',
  'subject',
  'abilityId',
  'ttlSeconds',
  'confirmationJkt',
  'context',
  'requestId',
];
const SUBJECT_FIELDS: readonly string[] = ['id', 'kind', 'orgId'];

function requireText(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new SvcConfigurationError(
      `issueCapabilityToken: \`${field}\` must be a non-empty string`,
    );
  }
  return value;
}

function checkSubject(subject: DelegatedSubject): DelegatedSubject {
  if (subject === null || typeof subject !== 'object' || Array.isArray(subject)) {
    throw new SvcConfigurationError(
      'issueCapabilityToken: `subject` must be { id, kind?, orgId? }',
    );
  }
  // A misspelt `orgID` would mint the subject without its organisation.
  refuseUnknownKeys(subject, SUBJECT_FIELDS, 'issueCapabilityToken: `subject`', { noun: 'field' });
  const checked: DelegatedSubject = { id: requireText(subject.id, 'subject.id') };
  if (subject.kind !== undefined) {
    const kind = requireText(subject.kind, 'subject.kind');
    if (isPrincipalKindTooLong(kind)) {
      throw new SvcConfigurationError(
        `issueCapabilityToken: \`subject.kind\` exceeds ${MAX_PRINCIPAL_KIND_LENGTH} characters`,
      );
    }
    checked.kind = kind;
  }
  if (subject.orgId !== undefined) checked.orgId = requireText(subject.orgId, 'subject.orgId');
  return checked;
}

/**
 * Resolves a token's lifetime. The plane's `ttlSeconds` is both the default and the ceiling: a
 * request may ask for less, never more. Signing-key rotation sizes its overlap window from that
 * ceiling, so a caller able to ask for a longer token could outlive a key's retirement.
 */
export function effectiveTtlSeconds(requested: unknown, planeTtlSeconds: number): number {
  const ceiling = Math.min(planeTtlSeconds, MAX_CAPABILITY_TOKEN_TTL_SECONDS);
  if (requested === undefined) return ceiling;
  if (typeof requested !== 'number' || !Number.isInteger(requested) || requested <= 0) {
    throw new CapabilityAuthError('ttlSeconds must be a positive integer', {
      status: 403,
      reason: 'invalid_ttl',
    });
  }
  return Math.min(requested, ceiling);
}

/**
 * The options of a direct mint as an object with no key beyond {@link ISSUE_OPTIONS}: a
 * misspelt `ttlSecond` or `subjet` would otherwise mint a token the caller did not ask for.
 */
function checkIssueOptions(options: unknown, label: string): void {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new SvcConfigurationError(`${label}: options must be an object`);
  }
  refuseUnknownKeys(options, ISSUE_OPTIONS, label);
}

/** What a mint needs from its options once they are checked. */
interface MintRequest {
  callerServiceId: string;
  targetServiceId: string;
  subject: DelegatedSubject | undefined;
  scopes: string[];
  ttlSeconds: number;
}

/**
 * Builds the issuer functions over one catalog and one signing authority.
 *
 * A mint is written as plain functions returning promises rather than nested async functions:
 * with every check synchronous and the target and keys read without waiting, the signature is
 * the only thing a mint waits for, and each async layer would add a promise, a suspended frame
 * and a turn of the microtask queue to every token.
 */
export function createIssuer(deps: IssuerDependencies) {
  const now = deps.now ?? Date.now;

  function checkedRequest(options: IssueCapabilityTokenOptions): MintRequest {
    const callerServiceId = requireText(options.callerServiceId, 'callerServiceId');
    const targetServiceId = requireText(options.targetServiceId, 'targetServiceId');
    if (options.callerAccess !== 'service' && options.callerAccess !== 'plane') {
      throw new SvcConfigurationError(
        "issueCapabilityToken: `callerAccess` ('service' or 'plane') is required on every mint",
      );
    }
    const subject = options.subject === undefined ? undefined : checkSubject(options.subject);
    if (subject !== undefined && options.callerAccess === 'service') {
      throw new SvcConfigurationError(
        "issueCapabilityToken: a subject cannot be minted with callerAccess 'service'",
      );
    }
    if (!Array.isArray(options.scopes)) {
      throw new SvcConfigurationError('issueCapabilityToken: `scopes` must be an array');
    }
    const scopes = normalizeScopes(options.scopes);
    if (scopes.length === 0) {
      // The grant check reads the requested scopes: with none it would pass for any caller,
      // granted anything on the target or not.
      throw new CapabilityAuthError(
        `A capability token for service "${targetServiceId}" needs at least one granted scope`,
        { status: 403, reason: 'scopes_required' },
      );
    }
    const ttlSeconds = effectiveTtlSeconds(options.ttlSeconds, deps.defaultTtlSeconds);
    return { callerServiceId, targetServiceId, subject, scopes, ttlSeconds };
  }

  /** The grant check on the resolved target, then the signature. */
  function grantAndSign(
    options: IssueCapabilityTokenOptions,
    request: MintRequest,
    brokered: boolean,
    target: ResolvedTarget,
  ): Promise<IssuedCapabilityToken> {
    checkNormalizedGrant(target, request.callerServiceId, request.scopes, options.abilityId);
    const authority = deps.authority(options.context);
    return authority instanceof Promise
      ? authority.then((loaded) => sign(options, request, brokered, loaded))
      : sign(options, request, brokered, authority);
  }

  function sign(
    options: IssueCapabilityTokenOptions,
    request: MintRequest,
    brokered: boolean,
    authority: SigningAuthority,
  ): Promise<IssuedCapabilityToken> {
    const { callerServiceId, subject, scopes } = request;
    const iat = Math.floor(now() / 1000);
    const claims: CapabilityTokenClaims = {
      iss: deps.issuer,
      sub: subject?.id ?? callerServiceId,
      aud: request.targetServiceId,
      scp: scopes,
      spa: options.callerAccess,
      jti: crypto.randomUUID(),
      iat,
      nbf: iat,
      exp: iat + request.ttlSeconds,
    };
    if (subject !== undefined) {
      claims.act = { sub: callerServiceId };
      if (subject.kind !== undefined) claims.spk = subject.kind;
      if (subject.orgId !== undefined) claims.spo = subject.orgId;
    }
    if (brokered) claims.spb = deps.planeServiceId;
    if (options.confirmationJkt !== undefined) claims.cnf = { jkt: options.confirmationJkt };
    // signCapabilityToken in two steps, so that the token and the result come in one step. What
    // it throws, every caller of this function turns into a rejection.
    const started = startCapabilitySignature(claims, authority.signer);
    // Built while the signature is computed, not after it.
    const expiresAt = new Date(claims.exp * 1000);
    return started.signature.then((signature) => ({
      token: compactCapabilityToken(started, signature),
      expiresAt,
      scopes,
      claims,
    }));
  }

  function mint(
    options: IssueCapabilityTokenOptions,
    brokered: boolean,
    resolved?: ResolvedTarget,
  ): Promise<IssuedCapabilityToken> {
    try {
      const request = checkedRequest(options);
      const { targetServiceId } = request;
      // The grant check runs on every mint: nothing is trusted from an earlier one. A caller
      // that already resolved the target for this very request (and decided on that document)
      // passes it, so the decision and the grant check read one document and discovery runs once.
      const target = resolved?.endpoint.id === targetServiceId
        ? resolved
        : deps.catalog.peek(targetServiceId, 'token');
      if (target !== undefined) return grantAndSign(options, request, brokered, target);
      return deps.catalog.target(
        targetServiceId,
        options.context,
        'token',
        options.requestId !== undefined ? { requestId: options.requestId } : undefined,
      ).then((discovered) => grantAndSign(options, request, brokered, discovered));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  function checkedMint(
    options: IssueCapabilityTokenOptions,
    brokered: boolean,
    label: string,
  ): Promise<IssuedCapabilityToken> {
    try {
      checkIssueOptions(options, label);
    } catch (error) {
      return Promise.reject(error);
    }
    return mint(options, brokered);
  }

  return {
    /** Mints a non-brokered token for trusted plane code. */
    issueCapabilityToken(options: IssueCapabilityTokenOptions): Promise<IssuedCapabilityToken> {
      return checkedMint(options, false, 'issueCapabilityToken');
    },
    /** Mints a brokered token: carries the signed `spb` ingress-protected services require. */
    issueBrokeredCapabilityToken(
      options: IssueCapabilityTokenOptions,
    ): Promise<IssuedCapabilityToken> {
      return checkedMint(options, true, 'issueBrokeredCapabilityToken');
    },
    /** Internal: mint (brokered or not) with a target this request already resolved. */
    mintWithTarget: mint,
  };
}
