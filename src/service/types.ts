/**
 * Types that flow from ability definitions: the typed client of an ability (`AbilityRpc`) and
 * the handler object a definition's factory must return, both inferred from the schemas.
 *
 * @module
 */
import type { SchemaInput, SchemaOutput } from '../core/schema.ts';
import type { AbilityDefinition, AbilityMethods } from './ability.ts';
import type { MethodDefinition } from './method.ts';

/** What a streaming handler may return: an async iterable, a sync iterable or a stream. */
export type StreamSource<T> = AsyncIterable<T> | Iterable<T> | ReadableStream<T>;

/**
 * The handler implementation of one method. It receives the validated input (the input
 * schema's output type) and returns what the output schema accepts: one value for a unary
 * method, a {@link StreamSource} of items for a streaming one.
 */
export type HandlerMethod<M> = M extends MethodDefinition<infer I, infer O, infer S>
  ? S extends true ? (
      input: SchemaOutput<I>,
    ) => StreamSource<SchemaInput<O>> | Promise<StreamSource<SchemaInput<O>>>
  : (input: SchemaOutput<I>) => SchemaInput<O> | Promise<SchemaInput<O>>
  : never;

/** The object a handler factory returns: one implementation per declared method. */
export type AbilityHandlerObject<M extends AbilityMethods> = {
  [K in keyof M]: HandlerMethod<M[K]>;
};

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
