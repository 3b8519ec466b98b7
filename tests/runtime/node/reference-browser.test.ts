// The demo's API reference page in a real headless browser (Debian's chromium, driven by
// playwright-core): Swagger UI renders every operation of the demo's OpenAPI document, nothing
// breaks the page's Content-Security-Policy, and the browser's own network log shows that every
// request the page made went to 127.0.0.1: the page, Swagger UI's two files, the start script
// and the document. Without /usr/bin/chromium the test is skipped, unless
// SVCPLANE_REQUIRE_BROWSER=1 (CI) makes that a failure.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import process from 'node:process';
import { test } from 'node:test';
import { type Browser, chromium } from 'playwright-core';
import { startDemo } from '../../../examples/demo-deployment.ts';

const CHROMIUM = '/usr/bin/chromium';
const REQUIRED = process.env.SVCPLANE_REQUIRE_BROWSER === '1';
const MISSING = !existsSync(CHROMIUM);
const STEP_MS = 30_000;

/** One request from the browser's network log. */
interface LoggedRequest {
  url: string;
  /** Who started it: an origin, or `not an origin` for the browser itself. */
  initiator: string;
  /** The (top-frame, frame) sites it is partitioned under: the page's site for its requests. */
  isolationKey: string;
}

/** The requests (`URL_REQUEST_START_JOB` events) in a Chromium net log. */
function loggedRequests(file: string): LoggedRequest[] {
  const log = JSON.parse(readFileSync(file, 'utf8')) as {
    constants: { logEventTypes: Record<string, number> };
    events: { type: number; params?: Record<string, unknown> }[];
  };
  const startJob = log.constants.logEventTypes.URL_REQUEST_START_JOB;
  return log.events
    .filter((event) => event.type === startJob && typeof event.params?.url === 'string')
    .map((event) => ({
      url: event.params!.url as string,
      initiator: String(event.params!.initiator ?? ''),
      isolationKey: String(event.params!.network_isolation_key ?? ''),
    }));
}

function isLoopback(url: string): boolean {
  return new URL(url).hostname === '127.0.0.1';
}

test("the demo's reference page renders its operations in chromium, fetching only from 127.0.0.1", {
  timeout: 120_000,
  skip: MISSING && !REQUIRED
    ? `${CHROMIUM} is not installed (apt-get install chromium; SVCPLANE_REQUIRE_BROWSER=1 requires it)`
    : false,
}, async () => {
  assert.ok(!MISSING, `${CHROMIUM} is required (SVCPLANE_REQUIRE_BROWSER=1) but not installed`);
  const scratch = mkdtempSync(path.join(tmpdir(), 'svcplane-browser-'));
  const netLog = path.join(scratch, 'net-log.json');
  const demo = await startDemo();
  let browser: Browser | undefined;
  const seen: string[] = [];
  const problems: string[] = [];
  try {
    const openapi = await (await fetch(demo.urls.openapi)).json() as {
      paths: Record<string, Record<string, { operationId?: string }>>;
    };
    const operationIds = Object.values(openapi.paths)
      .flatMap((item) => Object.values(item).map((operation) => operation.operationId))
      .filter((id): id is string => id !== undefined);
    assert.ok(operationIds.includes('orders.catalog.list'), 'the demo publishes REST routes');

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      timeout: STEP_MS,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        `--log-net-log=${netLog}`,
      ],
    });
    const context = await browser.newContext();
    context.on('request', (request) => seen.push(request.url()));
    const page = await context.newPage();
    page.on('request', (request) => seen.push(request.url()));
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error' && /Content Security Policy/i.test(message.text())) {
        problems.push(`CSP: ${message.text()}`);
      }
    });
    const pageUrl = demo.urls.reference;
    const response = await page.goto(pageUrl, { timeout: STEP_MS });
    assert.equal(response?.status(), 200);

    const rendered = page.locator('.opblock-summary-operation-id');
    await page.waitForFunction(
      (count) => document.querySelectorAll('.opblock-summary-operation-id').length >= count,
      operationIds.length,
      { timeout: STEP_MS },
    );
    const texts = (await rendered.allTextContents()).map((text) => text.trim());
    const shown = new Set(texts);
    for (const id of operationIds) assert.ok(shown.has(id), `operation ${id} is rendered`);
    // Each operation once: one tag per operation, its service being the tag's parent.
    assert.equal(texts.length, operationIds.length, texts.join(', '));
    const paths = new Set(
      (await page.locator('.opblock-summary-path').allTextContents()).map((text) =>
        text.replace(/\u200b/g, '').trim()
      ),
    );
    for (const documented of Object.keys(openapi.paths)) {
      assert.ok(paths.has(documented), `path ${documented} is rendered`);
    }
    assert.equal(await page.title(), 'svcplane demo: API reference');
    assert.deepEqual(problems, []);
    await context.close();
    await browser.close();
    browser = undefined;

    // Playwright's view: every request of the page and its context.
    assert.ok(seen.length > 0);
    for (const url of seen) assert.ok(isLoopback(url), `the page requested ${url}`);
    const origin = new URL(pageUrl).origin;
    for (
      const needed of [
        pageUrl,
        `${pageUrl}/swagger-ui-bundle.js`,
        `${pageUrl}/swagger-ui.css`,
        `${pageUrl}/init.js`,
        `${origin}/openapi.json`,
      ]
    ) {
      assert.ok(seen.includes(needed), `the page requested ${needed}`);
    }

    // The browser's own network log: every request made for the page (partitioned under its
    // site, or started by it) went to 127.0.0.1. Chromium's own background requests (updater,
    // account checks) are the browser's, started by no origin and partitioned under none of
    // the page's sites; they are left out, and only they may leave the machine.
    const logged = loggedRequests(netLog);
    const forThePage = logged.filter((request) =>
      request.isolationKey.includes('127.0.0.1') || request.initiator.includes('127.0.0.1')
    );
    assert.ok(forThePage.some((request) => request.url === `${origin}/openapi.json`));
    assert.ok(forThePage.some((request) => request.url === `${pageUrl}/swagger-ui-bundle.js`));
    for (const request of forThePage) {
      assert.ok(isLoopback(request.url), `the page's request left 127.0.0.1: ${request.url}`);
    }
    for (const request of logged.filter((request) => !forThePage.includes(request))) {
      assert.equal(request.initiator, 'not an origin', `${request.url} was started by a page`);
    }
  } finally {
    await browser?.close();
    await demo.close();
    rmSync(scratch, { recursive: true, force: true });
  }
});
