// The MCP SDK's own client against the fixture plane served by `serveBun` on 127.0.0.1.
import { test } from 'node:test';
import { serveBun } from '../../../src/adapters/bun.ts';
import { sdkClientListsAndCallsTools } from '../mcp-client-scenario.ts';

test(
  "serveBun: the MCP SDK Client lists the plane's tools and calls one unary and one streaming tool with progress",
  { timeout: 60_000 },
  () => sdkClientListsAndCallsTools(serveBun),
);
