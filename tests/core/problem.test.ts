import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  MAX_PROBLEM_ISSUES,
  OPAQUE_PROBLEM_DETAIL,
  problemFromError,
  problemResponse,
  problemTitle,
} from '../../src/core/problem.ts';
import {
  AbilityHandlerError,
  AbilityValidationError,
  CapabilityAuthError,
  opaqueHandlerFailure,
  SvcConfigurationError,
  SvcTimeoutError,
} from '../../src/core/errors.ts';

async function readProblem(response: Response): Promise<Record<string, unknown>> {
  assert.equal(response.headers.get('content-type'), 'application/problem+json');
  return JSON.parse(await response.text());
}

test('problemResponse builds an RFC 9457 body with the taxonomy fields', async () => {
  const response = problemResponse({
    status: 403,
    code: 'capability_auth',
    detail: 'missing scope notes:read',
    reason: 'missing_scope',
    requestId: 'r-1',
  });
  assert.equal(response.status, 403);
  assert.deepEqual(await readProblem(response), {
    type: 'urn:svcplane:problem:capability_auth',
    title: 'Forbidden',
    status: 403,
    detail: 'missing scope notes:read',
    code: 'capability_auth',
    retryable: false,
    reason: 'missing_scope',
    requestId: 'r-1',
  });
});

test('problemResponse omits absent optional members and defaults retryable by status', async () => {
  const body = await readProblem(
    problemResponse({ status: 503, code: 'handler', detail: 'down for maintenance' }),
  );
  assert.deepEqual(body, {
    type: 'urn:svcplane:problem:handler',
    title: 'Service Unavailable',
    status: 503,
    detail: 'down for maintenance',
    code: 'handler',
    retryable: true,
  });
  const internal = await readProblem(
    problemResponse({ status: 500, code: 'internal', detail: 'x' }),
  );
  assert.equal(internal.retryable, false);
  const explicit = await readProblem(
    problemResponse({ status: 503, code: 'handler', detail: 'x', retryable: false }),
  );
  assert.equal(explicit.retryable, false);
});

test('problemResponse titles: fixed phrase per status, override, generic fallback', async () => {
  assert.equal(problemTitle(400), 'Bad Request');
  assert.equal(problemTitle(401), 'Unauthorized');
  assert.equal(problemTitle(404), 'Not Found');
  assert.equal(problemTitle(405), 'Method Not Allowed');
  assert.equal(problemTitle(413), 'Content Too Large');
  assert.equal(problemTitle(422), 'Unprocessable Content');
  assert.equal(problemTitle(429), 'Too Many Requests');
  assert.equal(problemTitle(500), 'Internal Server Error');
  assert.equal(problemTitle(504), 'Gateway Timeout');
  assert.equal(problemTitle(499), 'Client Error');
  assert.equal(problemTitle(599), 'Server Error');
  const body = await readProblem(
    problemResponse({
      status: 400,
      code: 'internal',
      detail: 'x',
      title: 'Unsupported MCP version',
    }),
  );
  assert.equal(body.title, 'Unsupported MCP version');
});

test('problemResponse keeps extra headers but always sets its own Content-Type', async () => {
  const response = problemResponse({
    status: 401,
    code: 'capability_auth',
    detail: 'missing credentials',
    headers: {
      'WWW-Authenticate': 'Svc-HMAC-SHA256',
      'Content-Type': 'text/html',
      'X-Request-Id': 'r-9',
    },
  });
  assert.equal(response.status, 401);
  assert.equal(response.headers.get('www-authenticate'), 'Svc-HMAC-SHA256');
  assert.equal(response.headers.get('x-request-id'), 'r-9');
  assert.equal(response.headers.get('content-type'), 'application/problem+json');
});

test('problemResponse turns a status outside 400..599 into 500', async () => {
  for (const status of [200, 302, 600, 42.5]) {
    const response = problemResponse({ status, code: 'internal', detail: 'x' });
    assert.equal(response.status, 500);
    assert.equal((await readProblem(response)).status, 500);
  }
});

test('problemResponse lists only { message, path } of issues', async () => {
  const body = await readProblem(problemResponse({
    status: 422,
    code: 'ability_validation',
    detail: 'invalid input',
    issues: [
      { message: 'expected string', path: ['name'], secret: 'x' } as never,
      { message: 'too small', path: ['items', 0, { key: 'q' }] } as never,
      { message: 'root' },
      { nope: true } as never,
    ],
  }));
  assert.deepEqual(body.issues, [
    { message: 'expected string', path: ['name'] },
    // A Standard Schema `{ key }` segment is read as its key, as the service reads it.
    { message: 'too small', path: ['items', 0, 'q'] },
    { message: 'root' },
  ]);
});

test('problemFromError keeps the message and classification of taxonomy errors', async () => {
  const auth = problemFromError(
    new CapabilityAuthError('token expired', { reason: 'token_expired' }),
    'r-2',
    { 'WWW-Authenticate': 'Bearer' },
  );
  assert.equal(auth.status, 401);
  assert.equal(auth.headers.get('www-authenticate'), 'Bearer');
  assert.deepEqual(await readProblem(auth), {
    type: 'urn:svcplane:problem:capability_auth',
    title: 'Unauthorized',
    status: 401,
    detail: 'token expired',
    code: 'capability_auth',
    retryable: false,
    reason: 'token_expired',
    requestId: 'r-2',
  });
  const timeout = await readProblem(problemFromError(new SvcTimeoutError()));
  assert.equal(timeout.status, 504);
  assert.equal(timeout.retryable, true);
  assert.equal(timeout.code, 'timeout');
  assert.equal(timeout.reason, 'deadline_exceeded');
  assert.equal('requestId' in timeout, false);
  const shaped = await readProblem(
    problemFromError(new AbilityHandlerError('Quota exceeded', { status: 429, reason: 'quota' })),
  );
  assert.deepEqual([shaped.status, shaped.code, shaped.retryable, shaped.reason, shaped.detail], [
    429,
    'handler',
    true,
    'quota',
    'Quota exceeded',
  ]);
});

test('problemFromError never shows a configuration error message, which can quote secrets', async () => {
  const leaked = '{"kty":"EC","d":"private-scalar"}';
  const config = await readProblem(
    problemFromError(
      new SvcConfigurationError(`signing key ${leaked} is malformed`, { reason: 'invalid_keys' }),
    ),
  );
  assert.deepEqual([config.status, config.code, config.reason], [500, 'internal', 'invalid_keys']);
  assert.equal(JSON.stringify(config).includes('private-scalar'), false);
  assert.equal(config.detail, OPAQUE_PROBLEM_DETAIL);
});

test('problemFromError includes the issues of input validation errors', async () => {
  const error = new AbilityValidationError('notes.create: invalid input', {
    issues: [{ message: 'Required', path: ['title'] }],
  });
  const response = problemFromError(error, 'r-3');
  assert.equal(response.status, 422);
  const body = await readProblem(response);
  assert.equal(body.code, 'ability_validation');
  assert.equal(body.reason, 'invalid_input');
  assert.deepEqual(body.issues, [{ message: 'Required', path: ['title'] }]);
});

test('problemFromError does not echo output validation issues', async () => {
  const error = new AbilityValidationError('notes.get: invalid output', {
    status: 500,
    issues: [{ message: 'expected number, received "SECRET-row"', path: ['id'] }],
  });
  const response = problemFromError(error);
  assert.equal(response.status, 500);
  const text = await response.text();
  assert.ok(!text.includes('SECRET'), text);
  assert.equal(JSON.parse(text).code, 'ability_validation');
});

test('problemFromError bounds the number of issues', async () => {
  const issues = Array.from({ length: 500 }, (_, i) => ({ message: `bad ${i}`, path: [i] }));
  const body = await readProblem(problemFromError(new AbilityValidationError('x', { issues })));
  assert.equal((body.issues as unknown[]).length, MAX_PROBLEM_ISSUES);
});

test('problemFromError never leaks the message, stack or path of an unshaped error', async () => {
  const secret = 'SECRET-4821 postgres://u:p@db /srv/app/node_modules/x.js';
  const failures: unknown[] = [
    new Error(secret),
    new TypeError(secret),
    Object.assign(new Error(secret), { code: 'ENOENT', status: 404, path: '/etc/secret' }),
    secret,
    42,
    null,
    undefined,
    { message: secret, stack: secret },
  ];
  for (const failure of failures) {
    const response = problemFromError(failure, 'r-4');
    assert.equal(response.status, 500);
    const text = await response.text();
    assert.ok(!text.includes('SECRET'), text);
    assert.ok(!text.includes('node_modules'), text);
    assert.deepEqual(JSON.parse(text), {
      type: 'urn:svcplane:problem:internal',
      title: 'Internal Server Error',
      status: 500,
      detail: OPAQUE_PROBLEM_DETAIL,
      code: 'internal',
      retryable: false,
      requestId: 'r-4',
    });
  }
});

test('problemFromError of an opaque handler failure says only the opaque message', async () => {
  const opaque = opaqueHandlerFailure('fail', new Error('SECRET-77'));
  const text = await problemFromError(opaque).text();
  assert.ok(!text.includes('SECRET'));
  const body = JSON.parse(text);
  assert.equal(body.detail, 'Svc ability handler failed: fail');
  assert.equal(body.reason, 'handler_failed');
  assert.equal(body.status, 500);
});

test('problemFromError re-validates a received plain error', async () => {
  const received = Object.assign(new Error('refused'), {
    code: 'capability_auth',
    status: 503,
    retryable: true,
    reason: 'bad reason with spaces',
  });
  const body = await readProblem(problemFromError(received));
  assert.equal(body.status, 401);
  assert.equal(body.retryable, false);
  assert.equal(body.detail, 'refused');
  assert.equal('reason' in body, false);
});
