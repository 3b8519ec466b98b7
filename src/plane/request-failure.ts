/**
 * The plane's report of a request it could not serve: the caller gets an opaque problem, so the
 * operator must get the cause (a broken `signingKeys(env)`, a signer that failed, a bug).
 *
 * @module
 */
import { describeErrorForLog, loggedRequestPath, type SvcLogEvent } from '../core/logging.ts';

/**
 * Logged (level `error`, with `requestId`, `method`, `path`, `status` and the cause's `error`
 * name and message) once for each plane request answered with a 5xx problem.
 */
export const PLANE_REQUEST_FAILED_EVENT = 'svc.plane.request_failed';

/** The {@link PLANE_REQUEST_FAILED_EVENT} of `request`, answered `status` because of `error`. */
export function planeRequestFailed(
  request: Request,
  requestId: string,
  status: number,
  error: unknown,
): SvcLogEvent {
  return {
    event: PLANE_REQUEST_FAILED_EVENT,
    level: 'error',
    requestId,
    method: request.method,
    path: loggedRequestPath(request.url),
    status,
    error: describeErrorForLog(error),
  };
}
