/**
 * The reference page's own text: the HTML shell, the script that starts Swagger UI, and the
 * Content-Security-Policy they are served under. Every URL in them is relative to the page, so
 * the plane's `app` mounted below a prefix still serves a working page.
 *
 * @module
 */

/** The page's start script, served below the page (no inline script: the CSP forbids it). */
export const REFERENCE_INIT_SCRIPT = 'init.js';

/** `/a/b/reference` → `reference/<name>`: a file below the page, relative to the page. */
export function pageRelativeFile(pagePath: string, name: string): string {
  return `${pagePath.slice(pagePath.lastIndexOf('/') + 1)}/${name}`;
}

/** `/a/b/reference` and `/openapi.json` → `../../openapi.json`. */
export function pageRelativePath(pagePath: string, targetPath: string): string {
  const depth = pagePath.split('/').length - 2;
  return `${'../'.repeat(depth)}${targetPath.slice(1)}`;
}

const HTML_ESCAPES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => HTML_ESCAPES[character]);
}

/**
 * The page: Swagger UI's stylesheet and bundle, then the start script, all below the page. The
 * empty `data:` icon keeps the browser from asking for `/favicon.ico`.
 */
export function referencePageHtml(pagePath: string, title: string): string {
  const file = (name: string) => escapeHtml(pageRelativeFile(pagePath, name));
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}: API reference</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${file('swagger-ui.css')}">
</head>
<body>
<div id="swagger-ui"></div>
<script src="${file('swagger-ui-bundle.js')}"></script>
<script src="${file(REFERENCE_INIT_SCRIPT)}"></script>
</body>
</html>
`;
}

/**
 * Starts Swagger UI on the plane's document, fetched over HTTP from its path relative to the
 * page. No validator badge (it would send the document to a third party), and no `?url=` or
 * `?configUrl=` from the page's address: a crafted link must not show another document here.
 */
export function referenceInitScript(pagePath: string, openApiPath: string): string {
  const documentUrl = JSON.stringify(pageRelativePath(pagePath, openApiPath));
  return `'use strict';
window.ui = SwaggerUIBundle({
  url: new URL(${documentUrl}, document.baseURI).href,
  dom_id: '#swagger-ui',
  validatorUrl: null,
  queryConfigEnabled: false,
  deepLinking: true,
  displayOperationId: true,
  presets: [SwaggerUIBundle.presets.apis],
  layout: 'BaseLayout',
});
`;
}

/**
 * Only the plane's own files run or style the page; Swagger UI's stylesheet draws its icons
 * from `data:` images; "Try it out" may call the plane's own origin and its public origins (the
 * document's `servers`), nothing else.
 */
export function referenceContentSecurityPolicy(publicOrigins: readonly string[]): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    ["connect-src 'self'", ...publicOrigins].join(' '),
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}
