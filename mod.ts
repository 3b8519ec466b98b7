/**
 * svcplane: scoped capability tokens between services, typed RPC with validation, and a control
 * plane that signs the tokens, checks grants and aggregates the services' discovery documents.
 * Its front doors: a REST facade with its OpenAPI 3.2 document and the public RPC broker (MCP
 * tools are not built yet).
 *
 * @module
 */
export * from './src/core/mod.ts';
export * from './src/service/mod.ts';
export * from './src/caller/mod.ts';
export * from './src/plane/mod.ts';
