// The MCP SDK's own client against the fixture plane served by `serveDeno` on 127.0.0.1.
import { test } from 'node:test';
import { serveDeno } from '../../../src/adapters/deno.ts';
import { sdkClientListsAndCallsTools } from '../mcp-client-scenario.ts';

test(
  "serveDeno: the MCP SDK Client lists the plane's tools and calls one unary and one streaming tool with progress",
  { timeout: 60_000 },
  () => sdkClientListsAndCallsTools(serveDeno),
);
