/**
 * The shape of a service discovery document (`/.well-known/svc/service.json`), shared by the
 * service that projects it and the control plane that validates one it received.
 *
 * @module
 */
import type {
  McpPromptProjection,
  McpResourceProjection,
  McpToolProjection,
} from './mcp-projection.ts';
import type { JsonSchema } from '../core/schema.ts';
import type { AbilityAccess, AbilityExposure, AbilityTransport } from './ability.ts';
import type { RestMethod } from './rest-path.ts';

/** One method of an ability discovery entry. */
export interface MethodDiscoveryEntry {
  /** Method-level scopes (the entry's ability-level scopes apply as well). */
  scopes: string[];
  /** JSON Schema (draft 2020-12) of the input object. */
  inputSchema: JsonSchema;
  /** JSON Schema (draft 2020-12) of the output; of one item for a streaming method. */
  outputSchema: JsonSchema;
  /** Present (and `true`) only for a streaming method. */
  stream?: true;
  /** Present (and `true`) only when the method is marked idempotent. */
  idempotent?: true;
  /** The effective per-method ceiling in ms; `0` when unbounded (streams, opt-outs). */
  timeoutMs: number;
  /** REST projection, status filled in. */
  rest?: { method: RestMethod; path: string; status: number };
  /** MCP tool projection. */
  mcp?: McpToolProjection;
  /** MCP prompt projection (never on a streaming method). */
  mcpPrompt?: McpPromptProjection;
  /** MCP resource projection (never on a streaming method). */
  mcpResource?: McpResourceProjection;
  /** The method's description, when it declares one. */
  description?: string;
}

/** One ability of a discovery document (DESIGN.md "Discovery ability entry"). */
export interface AbilityDiscoveryEntry {
  /** The ability id, `<service>.<name>`. */
  id: string;
  /** Human-readable name, when the ability declares one. */
  title?: string;
  /** Human-readable description, when the ability declares one. */
  description?: string;
  /** Who may see the ability through the plane's public front doors. */
  exposure: AbilityExposure;
  /** Which callers may reach it: `service` admits only callers proven to be services. */
  access: AbilityAccess;
  /** Ability-level scopes, required for every method. */
  scopes: string[];
  /** The RPC route and the transports it is served over. */
  rpc: { path: string; transports: AbilityTransport[] };
  /** The ability's methods by name. */
  methods: Record<string, MethodDiscoveryEntry>;
}

/** The discovery document of a service. */
export interface ServiceDiscoveryDocument {
  /** The service id; the plane accepts the document only when it equals the endpoint's id. */
  id: string;
  /** Human-readable name of the service. */
  title: string;
  /** The service's own version string. */
  version: string;
  /** The service's capability catalog, when it publishes one. */
  capabilities?: { serviceId?: string; scopes?: Record<string, { description?: string }> };
  /** Present when the service accepts only tokens brokered by the named control plane. */
  ingress?: { required: true; brokerServiceId: string };
  /** One entry per ability the service serves. */
  abilities: AbilityDiscoveryEntry[];
}

/** Why a received discovery document was refused (the `reason` of the error). */
export type DiscoveryRefusalReason =
  | 'discovery_malformed'
  | 'discovery_service_mismatch'
  | 'discovery_rest_variable'
  | 'discovery_duplicate_projection';

/** Sets `name` as an own data property, so a scope named `__proto__` stays a scope. */
export function defineScopeEntry(
  scopes: Record<string, { description?: string }>,
  name: string,
  description: string | undefined,
): void {
  Object.defineProperty(scopes, name, {
    value: description !== undefined ? { description } : {},
    enumerable: true,
    writable: true,
    configurable: true,
  });
}
