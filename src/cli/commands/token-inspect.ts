/**
 * `svcplane token inspect <jwt> [--jwks <url>] [--issuer <iss>] [--audience <aud>]`: a capability
 * token's header, claims, the identity a service would hand its handlers, its expiry, and — with
 * a JWKS — the verdict of the library's own verifier, with the exact refusal reason.
 *
 * @module
 */
import { decodeBase64Url } from '../../core/base64url.ts';
import { verifyCapabilityToken } from '../../core/capability-token.ts';
import { CapabilityAuthError, svcErrorInfo } from '../../core/errors.ts';
import { identityFromClaims, readCapabilityClaims } from '../../core/token-claims.ts';
import { jwksFromUrl } from '../../service/jwks-sources.ts';
import { parseArguments, positionals } from '../arguments.ts';
import { EXIT_CODES } from '../failure.ts';
import type { CliOutput } from '../output.ts';

export const TOKEN_INSPECT_USAGE =
  'svcplane token inspect <jwt> [--jwks <url>] [--issuer <iss>] [--audience <aud>] [--json]';

const JWKS_PATH = '/.well-known/svc/jwks.json';

function decodedSegment(segment: string | undefined): unknown {
  const bytes = segment === undefined ? undefined : decodeBase64Url(segment);
  if (bytes === undefined) return undefined;
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return undefined;
  }
}

/** A plane's base URL stands for its JWKS route. */
function jwksUrl(given: string): string {
  const url = new URL(given);
  if (url.pathname === '/' || url.pathname === '') url.pathname = JWKS_PATH;
  return url.href;
}

/** `1h 4m`, `59s`: how far `seconds` is, roughly. */
function duration(seconds: number): string {
  const s = Math.abs(Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

interface Verdict {
  verified: boolean;
  valid?: boolean;
  reason?: string;
  status?: number;
  message: string;
}

async function verdictOf(
  token: string,
  claims: Record<string, unknown> | undefined,
  options: { jwks?: string; issuer?: string; audience?: string; claimsProblem?: string },
): Promise<Verdict> {
  if (options.jwks === undefined) {
    // A claim set that cannot be read is refused by every service, keys or not.
    if (options.claimsProblem !== undefined) {
      return {
        verified: false,
        valid: false,
        reason: 'invalid_claims',
        status: 401,
        message: `refused: invalid_claims (401): ${options.claimsProblem}`,
      };
    }
    return { verified: false, message: 'not verified: pass --jwks <plane or JWKS url>' };
  }
  const url = jwksUrl(options.jwks);
  try {
    await verifyCapabilityToken(token, {
      keys: jwksFromUrl(url),
      // Without --issuer/--audience the token's own are taken: the signature, key and times are
      // still checked, and the verdict says which were not.
      issuer: options.issuer ?? String(claims?.iss ?? '?'),
      audience: options.audience ?? String(claims?.aud ?? '?'),
    });
    const unchecked = [
      ...(options.issuer === undefined ? ['issuer'] : []),
      ...(options.audience === undefined ? ['audience'] : []),
    ];
    return {
      verified: true,
      valid: true,
      message: `valid: signature verifies against ${url}` +
        (unchecked.length > 0 ? ` (${unchecked.join(' and ')} taken from the token)` : ''),
    };
  } catch (error) {
    const info = svcErrorInfo(error);
    return {
      verified: true,
      valid: false,
      ...(info.reason !== undefined ? { reason: info.reason } : {}),
      status: info.status,
      message: `refused: ${info.reason ?? info.code} (${info.status}): ${(error as Error).message}`,
    };
  }
}

/** Runs `token inspect`. */
export async function tokenInspect(args: readonly string[], output: CliOutput): Promise<number> {
  const parsed = parseArguments(args, { values: ['jwks', 'issuer', 'audience'] });
  const [token] = positionals(parsed, 1, 1, TOKEN_INSPECT_USAGE);
  const [headerSegment, payloadSegment] = token.split('.');
  const header = decodedSegment(headerSegment);
  const payload = decodedSegment(payloadSegment);
  let claimsProblem: string | undefined;
  let identity: unknown;
  try {
    identity = identityFromClaims(readCapabilityClaims(payload, (problem) => {
      throw new CapabilityAuthError(problem, { reason: 'invalid_claims' });
    }));
  } catch (error) {
    claimsProblem = (error as Error).message;
  }
  const claims = payload !== null && typeof payload === 'object'
    ? payload as Record<string, unknown>
    : undefined;
  const exp = typeof claims?.exp === 'number' ? claims.exp : undefined;
  const now = Date.now() / 1000;
  const expiry = exp === undefined ? undefined : {
    expiresAt: new Date(exp * 1000).toISOString(),
    expired: exp <= now,
    secondsLeft: Math.round(exp - now),
  };
  const verdict = await verdictOf(token, claims, {
    ...(parsed.values.has('jwks') ? { jwks: parsed.values.get('jwks') } : {}),
    ...(parsed.values.has('issuer') ? { issuer: parsed.values.get('issuer') } : {}),
    ...(parsed.values.has('audience') ? { audience: parsed.values.get('audience') } : {}),
    ...(claimsProblem !== undefined ? { claimsProblem } : {}),
  });
  if (output.json) {
    output.data({
      header: header ?? null,
      claims: claims ?? null,
      identity: identity ?? null,
      ...(claimsProblem !== undefined ? { claimsProblem } : {}),
      expiry: expiry ?? null,
      verdict,
    });
  } else {
    output.line(`header    ${header === undefined ? '(not decodable)' : JSON.stringify(header)}`);
    output.line(`claims    ${claims === undefined ? '(not decodable)' : JSON.stringify(claims)}`);
    output.line(
      `identity  ${identity === undefined ? `(none: ${claimsProblem})` : JSON.stringify(identity)}`,
    );
    if (expiry !== undefined) {
      const when = expiry.expired
        ? `expired ${duration(expiry.secondsLeft)} ago`
        : `in ${duration(expiry.secondsLeft)}`;
      output.line(`expires   ${expiry.expiresAt} (${when})`);
    }
    output.line(`verdict   ${verdict.message}`);
  }
  return verdict.valid === false ? EXIT_CODES.capability_auth : EXIT_CODES.ok;
}
