/**
 * svcplane: scoped capability tokens between services, typed RPC with validation, and a control
 * plane that signs the tokens, checks grants and aggregates the services' discovery documents.
 * Its public RPC broker is built; the other front doors (REST + OpenAPI 3.2, MCP tools) are not yet.
 *
 * @module
 */
export * from './src/core/mod.ts';
export * from './src/service/mod.ts';
export * from './src/caller/mod.ts';
export * from './src/plane/mod.ts';
