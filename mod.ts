/**
 * svcplane: scoped capability tokens between services, and a control plane that exposes them as
 * REST + OpenAPI 3.2, MCP tools and a typed RPC broker.
 *
 * @module
 */
export * from './src/core/mod.ts';
export * from './src/service/mod.ts';
export * from './src/plane/mod.ts';
