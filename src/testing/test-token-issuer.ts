/**
 * A signing authority for tests: capability tokens a service accepts, without a control plane.
 *
 * **Key material.** No private key ships with this library. A key published in a package is
 * known to everyone who installs it, and a service that ended up trusting its JWKS (a test
 * configuration promoted by mistake) would accept tokens anyone can mint. So each
 * {@link createTestTokenIssuer} call generates a fresh ES256 key pair whose private half is
 * not extractable: it exists only inside WebCrypto, for the life of the issuer, and no test can
 * pass because a key was known in advance. When a test needs the same key across processes or
 * runs (a worker started separately, a control plane built from the same `signingKeys`), it
 * brings its own with `signingKey`, and keeps it where it keeps its other fixtures.
 *
 * Tokens are checked by the same claim rules the verifier applies, so the issuer never mints a
 * token a service would refuse as malformed; it does not check grants, which is the plane's job.
 *
 * @module
 */
import { encodeBase64Url } from '../core/base64url.ts';
import { type CapabilityPublicJwk, readCapabilityJwks } from '../core/capability-key-set.ts';
import {
  type CapabilitySigner,
  type CapabilityTokenClaims,
  signCapabilityToken,
} from '../core/capability-token.ts';
import { refuseUnknownKeys } from '../core/config-values.ts';
import { SvcConfigurationError } from '../core/errors.ts';
import type { CallerAccess } from '../core/identity.ts';
import {
  DEFAULT_CAPABILITY_TOKEN_TTL_SECONDS,
  MAX_CAPABILITY_TOKEN_TTL_SECONDS,
} from '../plane/issuer.ts';
import { loadSigningAuthority, type SigningKeyEntry } from '../plane/signing-keys.ts';
import type { ServiceAuthOptions } from '../service/service-options.ts';
import type { TokenRequester } from '../caller/ability-session.ts';

/** The issuer (`iss`) of a test issuer made without one. */
export const DEFAULT_TEST_TOKEN_ISSUER = 'https://control-plane.test';

/** The calling service (`sub`) of a test token that names none. */
export const DEFAULT_TEST_CALLER_ID = 'test-caller';

/** Options of {@link createTestTokenIssuer}. */
export interface TestTokenIssuerOptions {
  /** The issuer (`iss`) of every token, and the one services must expect. Default {@link DEFAULT_TEST_TOKEN_ISSUER}. */
  issuer?: string;
  /**
   * The key id of the generated key (1..128 visible ASCII characters). Default `test-` and
   * random characters, so two issuers in one process never share a kid.
   */
  kid?: string;
  /**
   * Key material to sign with instead of a generated key, in the form a control plane's
   * `signingKeys` takes: `{ kid, secret }` with a private P-256 JWK or PKCS#8 PEM. Its `kid` is
   * the kid; `kid` must then be left out.
   */
  signingKey?: SigningKeyEntry;
}

/**
 * What a test token says. Names are the contract's claim names; everything but `aud` and
 * `scopes` has a default, and the combination must be one the contract allows (a delegated
 * token is never `spa: 'service'`, `spk` and `spo` only on delegated tokens).
 */
export interface TestTokenOptions {
  /** The target service id (`aud`): the `id` the service was created with. */
  aud: string;
  /** Granted scopes (`scp`), sorted and de-duplicated as the plane mints them. */
  scopes: readonly string[];
  /**
   * The calling service (`sub`) on a plain token, the delegated principal on a delegated one.
   * Default {@link DEFAULT_TEST_CALLER_ID}.
   */
  sub?: string;
  /**
   * Caller access class (`spa`). Default `service` on a plain token (what a caller the plane
   * authenticated as a service gets), `plane` on a delegated one.
   */
  spa?: CallerAccess;
  /** The acting service of a delegated token (`act`); `sub` is then the principal. */
  act?: { sub: string };
  /** Broker service id (`spb`), what an ingress-protected service requires. */
  spb?: string;
  /** Principal kind of a delegated subject (`spk`, 1..512 characters). */
  spk?: string;
  /** Organization id of a delegated subject (`spo`). */
  spo?: string;
  /** Key confirmation (`cnf`): the RFC 7638 thumbprint of the caller's public JWK. */
  cnf?: { jkt: string };
  /** Token id (`jti`). Default a random UUID. */
  jti?: string;
  /**
   * Lifetime in seconds (a positive integer, at most `MAX_CAPABILITY_TOKEN_TTL_SECONDS`).
   * Default `DEFAULT_CAPABILITY_TOKEN_TTL_SECONDS`.
   */
  ttlSeconds?: number;
  /**
   * When the token was issued (`iat` and `nbf`); `exp` is this plus `ttlSeconds`. Default now.
   * A time in the past makes an expired token; one in the future a token not valid yet.
   */
  issuedAt?: Date;
}

/** What {@link TestTokenIssuer.tokenRequester} signs beyond what each request names. */
export type TestTokenDefaults = Omit<TestTokenOptions, 'aud' | 'sub' | 'scopes'>;

/** A signing authority for tests, and what a service under test needs to trust it. */
export interface TestTokenIssuer {
  /** The issuer (`iss`) of every token. */
  readonly issuer: string;
  /** The kid every token names in its header. */
  readonly kid: string;
  /** The public JWKS to verify the tokens with (public members only). */
  readonly jwks: { readonly keys: readonly CapabilityPublicJwk[] };
  /** `{ jwks, issuer }`, ready for `createService({ auth })`. */
  readonly auth: ServiceAuthOptions;
  /**
   * Signs a capability token. Rejects with `SvcConfigurationError` for an unknown option, an
   * invalid `ttlSeconds` or `issuedAt`, or claims the contract does not allow.
   */
  token(options: TestTokenOptions): Promise<string>;
  /**
   * A token requester for `abilitySession` that signs a fresh token for each request: `sub` the
   * caller, `aud` the target, `scp` the scopes asked for, plus `defaults`. Like a plane that
   * grants everything, so a session can renew its token as it would in production.
   */
  tokenRequester(defaults?: TestTokenDefaults): TokenRequester;
}

const ISSUER_OPTIONS: readonly string[] = ['issuer', 'kid', 'signingKey'];
const TOKEN_OPTIONS: readonly string[] = [
  'aud',
  'scopes',
  'sub',
  'spa',
  'act',
  'spb',
  'spk',
  'spo',
  'cnf',
  'jti',
  'ttlSeconds',
  'issuedAt',
];
const ES256_KEY = { name: 'ECDSA', namedCurve: 'P-256' } as const;
/** Visible ASCII, at most 128 characters, as the plane requires of a kid. */
const KID_PATTERN = /^[\x21-\x7e]{1,128}$/;

function refuse(message: string): never {
  throw new SvcConfigurationError(message, { reason: 'invalid_test_token' });
}

function checkedOptions<T extends object>(
  options: unknown,
  known: readonly string[],
  label: string,
): T {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    refuse(`${label}: options must be an object`);
  }
  refuseUnknownKeys(options, known, label);
  return options as T;
}

function checkedIssuer(issuer: unknown): string {
  if (issuer === undefined) return DEFAULT_TEST_TOKEN_ISSUER;
  if (typeof issuer !== 'string' || issuer === '') {
    refuse('createTestTokenIssuer: `issuer` must be a non-empty string');
  }
  return issuer;
}

function randomKid(): string {
  return `test-${encodeBase64Url(crypto.getRandomValues(new Uint8Array(9)))}`;
}

/** A fresh key pair whose private half never leaves WebCrypto. */
async function generatedSigner(
  kid: string,
): Promise<{ signer: CapabilitySigner; publicJwk: CapabilityPublicJwk }> {
  if (!KID_PATTERN.test(kid)) {
    refuse('createTestTokenIssuer: `kid` must be 1..128 visible ASCII characters');
  }
  const pair = await crypto.subtle.generateKey(ES256_KEY, false, ['sign', 'verify']);
  const exported = await crypto.subtle.exportKey('jwk', pair.publicKey);
  const publicJwk: CapabilityPublicJwk = {
    kty: 'EC',
    crv: 'P-256',
    x: exported.x as string,
    y: exported.y as string,
    kid,
    alg: 'ES256',
    use: 'sig',
  };
  return { signer: { kid, privateKey: pair.privateKey }, publicJwk };
}

/** The key a caller brought, through the plane's own loader (its checks and messages). */
async function suppliedSigner(
  entry: SigningKeyEntry,
): Promise<{ signer: CapabilitySigner; publicJwk: CapabilityPublicJwk }> {
  const authority = await loadSigningAuthority([entry]);
  return { signer: authority.signer, publicJwk: authority.jwks.keys[0] };
}

function checkedTtl(ttlSeconds: unknown): number {
  if (ttlSeconds === undefined) return DEFAULT_CAPABILITY_TOKEN_TTL_SECONDS;
  if (
    typeof ttlSeconds !== 'number' || !Number.isInteger(ttlSeconds) || ttlSeconds <= 0 ||
    ttlSeconds > MAX_CAPABILITY_TOKEN_TTL_SECONDS
  ) {
    refuse(
      `token: \`ttlSeconds\` must be a positive integer up to ${MAX_CAPABILITY_TOKEN_TTL_SECONDS}`,
    );
  }
  return ttlSeconds;
}

function checkedIssuedAt(issuedAt: unknown): number {
  if (issuedAt === undefined) return Math.floor(Date.now() / 1000);
  if (!(issuedAt instanceof Date) || Number.isNaN(issuedAt.getTime())) {
    refuse('token: `issuedAt` must be a valid Date');
  }
  return Math.floor(issuedAt.getTime() / 1000);
}

function checkedScopes(scopes: unknown): string[] {
  if (!Array.isArray(scopes)) refuse('token: `scopes` must be an array of scope names');
  return [...new Set(scopes as string[])].sort();
}

/** The claim set of one token; the signer checks it against the verifier's rules. */
function claimsFor(issuer: string, options: TestTokenOptions): CapabilityTokenClaims {
  const iat = checkedIssuedAt(options.issuedAt);
  const claims: CapabilityTokenClaims = {
    iss: issuer,
    sub: options.sub ?? DEFAULT_TEST_CALLER_ID,
    aud: options.aud,
    scp: checkedScopes(options.scopes),
    spa: options.spa ?? (options.act === undefined ? 'service' : 'plane'),
    jti: options.jti ?? crypto.randomUUID(),
    iat,
    nbf: iat,
    exp: iat + checkedTtl(options.ttlSeconds),
  };
  if (options.act !== undefined) claims.act = options.act;
  if (options.spb !== undefined) claims.spb = options.spb;
  if (options.spk !== undefined) claims.spk = options.spk;
  if (options.spo !== undefined) claims.spo = options.spo;
  if (options.cnf !== undefined) claims.cnf = options.cnf;
  return claims;
}

/**
 * Creates a test signing authority: a fresh ES256 key (or the `signingKey` given), its public
 * JWKS, and functions that sign contract-valid capability tokens with it. A service created
 * with `auth: issuer.auth` accepts those tokens as it would the plane's.
 *
 * Rejects with `SvcConfigurationError` for an unknown option, an empty `issuer`, an invalid
 * `kid`, both `kid` and `signingKey`, or a `signingKey` the control plane would refuse.
 */
export async function createTestTokenIssuer(
  options: TestTokenIssuerOptions = {},
): Promise<TestTokenIssuer> {
  const label = 'createTestTokenIssuer';
  const checked = checkedOptions<TestTokenIssuerOptions>(options, ISSUER_OPTIONS, label);
  const issuer = checkedIssuer(checked.issuer);
  if (checked.kid !== undefined && checked.signingKey !== undefined) {
    refuse(`${label}: give \`kid\` or \`signingKey\` (whose kid is used), not both`);
  }
  if (checked.kid !== undefined && typeof checked.kid !== 'string') {
    refuse(`${label}: \`kid\` must be a string`);
  }
  const { signer, publicJwk } = checked.signingKey === undefined
    ? await generatedSigner(checked.kid ?? randomKid())
    : await suppliedSigner(checked.signingKey);
  // Read back as a service reads it, so the issuer never publishes a JWKS its services refuse.
  readCapabilityJwks({ keys: [publicJwk] });
  const jwks = Object.freeze({ keys: Object.freeze([Object.freeze({ ...publicJwk })]) });
  const token = (tokenOptions: TestTokenOptions): Promise<string> => {
    try {
      const read = checkedOptions<TestTokenOptions>(tokenOptions, TOKEN_OPTIONS, 'token');
      return signCapabilityToken(claimsFor(issuer, read), signer);
    } catch (error) {
      return Promise.reject(error);
    }
  };
  return Object.freeze({
    issuer,
    kid: signer.kid,
    jwks,
    auth: Object.freeze({ jwks, issuer }),
    token,
    tokenRequester(defaults: TestTokenDefaults = {}): TokenRequester {
      const fixed = checkedOptions<TestTokenDefaults>(
        defaults,
        TOKEN_OPTIONS.filter((key) => key !== 'aud' && key !== 'sub' && key !== 'scopes'),
        'tokenRequester',
      );
      return (request) =>
        token({
          ...fixed,
          aud: request.targetServiceId,
          sub: request.callerServiceId,
          scopes: request.scopes,
        });
    },
  });
}

/**
 * A token requester that always answers `token`, for an `abilitySession` in a test that
 * signed its token up front. A session that presents it and is refused asks again and gets
 * the same token, so a refused token stays refused. Throws `SvcConfigurationError` now for
 * anything but a non-empty string.
 */
export function staticTokenRequester(token: string): TokenRequester {
  if (typeof token !== 'string' || token === '') {
    throw new SvcConfigurationError('staticTokenRequester: the token must be a non-empty string');
  }
  return () => Promise.resolve(token);
}
