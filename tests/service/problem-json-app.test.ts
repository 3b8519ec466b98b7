// A route served directly (serveRouteDirectly) answers exactly as the same route behind an app
// set up by installRequestIdAndProblemJson: request id, problem+json for a throw, the end report
// and the handler's context.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Hono } from 'hono';
import { HTTPException } from 'hono/http-exception';
import {
  contextRequestId,
  installRequestIdAndProblemJson,
  type RequestIdAndProblemJsonOptions,
  type RouteHandler,
  serveRouteDirectly,
} from '../../src/service/problem-json-app.ts';

const PATH = '/rpc/svc-a.echo';

interface Ended {
  requestId: string;
  status: number;
  thrown: unknown;
}

/** `handler` at PATH behind an app set up with `options`, and served directly with them. */
function servedBothWays(options: RequestIdAndProblemJsonOptions, handler: RouteHandler) {
  const app = new Hono();
  installRequestIdAndProblemJson(app, options);
  app.all(PATH, handler);
  return {
    viaApp: (request: Request, env?: unknown) => app.fetch(request, env) as Promise<Response>,
    direct: (request: Request, env?: unknown) =>
      serveRouteDirectly(request, env, undefined, PATH, handler, options),
  };
}

/** The two ways of serving `handler` at PATH, each with its own record of `end` reports. */
function bothWays(handler: RouteHandler) {
  const ended: Ended[] = [];
  let nextId = 0;
  const options: RequestIdAndProblemJsonOptions = {
    requestIdOf: (c) => c.req.header('X-Request-Id') ?? `generated-${++nextId}`,
    end: (c, requestId, _startedAt, thrown) =>
      ended.push({ requestId, status: c.res.status, thrown }),
  };
  return { ended, ...servedBothWays(options, handler) };
}

/** Both ways' answers to one POST, each checked to be a 500 problem+json, parsed. */
async function problemsBothWays(options: RequestIdAndProblemJsonOptions, handler: RouteHandler) {
  const ways = servedBothWays(options, handler);
  const problems = [];
  for (const serve of [ways.viaApp, ways.direct]) {
    const answer = await serve(post());
    assert.equal(answer.status, 500);
    assert.equal(answer.headers.get('Content-Type'), 'application/problem+json');
    problems.push(await answer.json());
  }
  return problems;
}

/**
 * Both ways' answers to one POST sent with `requestId`, each checked to be a `status`
 * problem+json echoing the id, and checked to be the same problem; that problem, parsed.
 */
async function sameProblemBothWays(
  ways: ReturnType<typeof bothWays>,
  requestId: string,
  status: number,
) {
  const problems = [];
  for (const serve of [ways.viaApp, ways.direct]) {
    const response = await serve(post({ 'X-Request-Id': requestId }));
    assert.equal(response.status, status);
    assert.equal(response.headers.get('Content-Type'), 'application/problem+json');
    assert.equal(response.headers.get('X-Request-Id'), requestId);
    problems.push(await response.json());
  }
  assert.deepEqual(problems[1], problems[0]);
  return problems[0];
}

function post(headers: HeadersInit = {}): Request {
  return new Request(`https://svc.internal${PATH}?x=1`, { method: 'POST', headers, body: 'b' });
}

test('a direct route echoes the request id it was sent, as the app does', async () => {
  const ways = bothWays((c) => new Response(contextRequestId(c)));
  for (const serve of [ways.viaApp, ways.direct]) {
    const response = await serve(post({ 'X-Request-Id': 'req-7' }));
    assert.equal(response.headers.get('X-Request-Id'), 'req-7');
    assert.equal(await response.text(), 'req-7');
  }
  assert.deepEqual(ways.ended.map((end) => end.requestId), ['req-7', 'req-7']);
});

test('a direct route that throws answers the same problem+json and reports the throw', async () => {
  const failure = new Error('the route broke');
  const ways = bothWays(() => {
    throw failure;
  });
  const problem = await sameProblemBothWays(ways, 'req-9', 500);
  assert.equal(problem.requestId, 'req-9');
  assert.doesNotMatch(JSON.stringify(problem), /the route broke/);
  assert.deepEqual(ways.ended, [
    { requestId: 'req-9', status: 500, thrown: failure },
    { requestId: 'req-9', status: 500, thrown: failure },
  ]);
});

test('a direct route hands its handler a context for its path, env and no parameters', async () => {
  const seen: unknown[][] = [];
  const ways = bothWays((c) => {
    seen.push([c.req.path, c.req.param(), c.env, c.req.query('x'), c.req.method]);
    return new Response('ok');
  });
  const env = { BINDING: 'bound' };
  await ways.viaApp(post(), env);
  await ways.direct(post(), env);
  assert.deepEqual(seen[1], seen[0]);
  assert.deepEqual(seen[0], [PATH, {}, env, '1', 'POST']);
});

test('a direct route whose request id cannot be chosen answers a problem, as the app does', async () => {
  const options: RequestIdAndProblemJsonOptions = {
    requestIdOf: () => {
      throw new Error('the id generator broke');
    },
  };
  const problems = await problemsBothWays(options, () => new Response('never'));
  for (const problem of problems) {
    assert.equal(typeof problem.requestId, 'string');
    assert.doesNotMatch(JSON.stringify(problem), /generator broke/);
  }
});

test('a direct route whose handler rejects later answers and reports as the app does', async () => {
  const failure = new Error('the route broke later');
  const ways = bothWays(async () => {
    await Promise.resolve();
    throw failure;
  });
  await sameProblemBothWays(ways, 'req-11', 500);
  assert.deepEqual(ways.ended, [
    { requestId: 'req-11', status: 500, thrown: failure },
    { requestId: 'req-11', status: 500, thrown: failure },
  ]);
});

test('a direct route keeps a policy refusal thrown later, as the app does', async () => {
  const ways = bothWays(async () => {
    await Promise.resolve();
    throw new HTTPException(429, { message: 'slow down' });
  });
  const problem = await sameProblemBothWays(ways, 'req-12', 429);
  assert.equal(problem.detail, 'slow down');
});

test('a direct route answers an async handler once, with the id and one end report', async () => {
  const ways = bothWays(async (c) => {
    await Promise.resolve();
    return new Response(`late ${contextRequestId(c)}`, { status: 201 });
  });
  for (const serve of [ways.viaApp, ways.direct]) {
    const response = await serve(post({ 'X-Request-Id': 'req-13' }));
    assert.equal(response.status, 201);
    assert.equal(response.headers.get('X-Request-Id'), 'req-13');
    assert.equal(await response.text(), 'late req-13');
  }
  assert.deepEqual(ways.ended, [
    { requestId: 'req-13', status: 201, thrown: undefined },
    { requestId: 'req-13', status: 201, thrown: undefined },
  ]);
});

test('a direct route whose end report throws answers a problem, as the app does', async () => {
  const options: RequestIdAndProblemJsonOptions = {
    requestIdOf: () => 'req-14',
    end: () => {
      throw new Error('the end report broke');
    },
  };
  const problems = await problemsBothWays(options, () => new Response('answered'));
  assert.deepEqual(problems[1], problems[0]);
  assert.equal(problems[0].requestId, 'req-14');
  assert.doesNotMatch(JSON.stringify(problems[0]), /end report broke/);
});
