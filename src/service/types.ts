/**
 * Types that flow from ability definitions: the typed client of an ability (`AbilityRpc`),
 * inferred from the schemas. The handler object a definition's factory must return
 * (`AbilityHandlerObject`) is declared with the definition in `ability.ts` and re-exported here.
 *
 * @module
 */
import type { SchemaInput, SchemaOutput } from '../core/schema.ts';
import type { AbilityDefinition } from './ability.ts';
import type { MethodDefinition } from './method.ts';

export type { AbilityHandlerObject, HandlerMethod, StreamSource } from './ability.ts';

/**
 * The typed client of one method: a unary method resolves to the output schema's output type;
 * a streaming method resolves to a `ReadableStream` of items.
 */
export type AbilityMethodRpc<M> = M extends MethodDefinition<infer I, infer O, infer S>
  ? S extends true ? (input: SchemaInput<I>) => Promise<ReadableStream<SchemaOutput<O>>>
  : (input: SchemaInput<I>) => Promise<SchemaOutput<O>>
  : never;

/** The typed client of an ability: `AbilityRpc<typeof echoAbility>`. */
export type AbilityRpc<A> = A extends AbilityDefinition<infer M>
  ? { [K in keyof M]: AbilityMethodRpc<M[K]> }
  : never;
