/**
 * A text `Response` that builds the runtime's own response only once something beyond its
 * status and headers is read. A serving helper that writes an answer's text straight to its
 * socket (Node's, for an HTTP batch) never needs the runtime's response at all, and on Node
 * building one costs more than the rest of answering a small batch: undici wraps every body,
 * a string too, in a web stream made transferable to workers (about 20 µs per response).
 *
 * Only a helper that said it takes such responses (through its `env`, see
 * {@link markTakesDeferredResponses}) is handed one: a runtime's own server (`Deno.serve`,
 * `Bun.serve`, Workers) accepts nothing but its own `Response`. Anyone else reading it (a
 * wrapper around the helper's `fetch`, middleware) sees an ordinary `Response`: every member
 * other than `status`, `ok`, `headers` and `bodyUsed` reads the built one.
 *
 * @module
 */

const TAKES_DEFERRED_RESPONSES = Symbol('svcplane.takesDeferredResponses');

/**
 * Marks a serving helper's `env` as taking deferred responses: what its `fetch` target returns
 * goes back through the helper, which reads them through the `Response` interface alone.
 */
export function markTakesDeferredResponses<T extends object>(env: T): T {
  (env as { [TAKES_DEFERRED_RESPONSES]?: true })[TAKES_DEFERRED_RESPONSES] = true;
  return env;
}

/** Whether `env` (a request's Hono `c.env`) came from a helper that takes deferred responses. */
export function takesDeferredResponses(env: unknown): boolean {
  return typeof env === 'object' && env !== null &&
    (env as { [TAKES_DEFERRED_RESPONSES]?: true })[TAKES_DEFERRED_RESPONSES] === true;
}

/** Every member of the runtime's `Response` prototype chain, nearest first. */
function* responseMembers(): Generator<[string, PropertyDescriptor]> {
  for (
    let prototype: object | null = Response.prototype;
    prototype !== null && prototype !== Object.prototype;
    prototype = Object.getPrototypeOf(prototype)
  ) {
    for (const name of Object.getOwnPropertyNames(prototype)) {
      yield [name, Object.getOwnPropertyDescriptor(prototype, name)!];
    }
  }
}

/** A text response whose runtime `Response` is built on first need. */
class DeferredTextResponse {
  #text: string;
  #status: number;
  #statusText: string | undefined;
  #headersInit: HeadersInit | undefined;
  #headers: Headers | undefined;
  #built: Response | undefined;

  constructor(text: string, init: ResponseInit) {
    this.#text = text;
    this.#status = init.status ?? 200;
    this.#statusText = init.statusText;
    this.#headersInit = init.headers;
  }

  get status(): number {
    return this.#built?.status ?? this.#status;
  }

  get ok(): boolean {
    return this.status >= 200 && this.status < 300;
  }

  get headers(): Headers {
    if (this.#built !== undefined) return this.#built.headers;
    return this.#headers ??= new Headers(this.#headersInit);
  }

  get bodyUsed(): boolean {
    return this.#built?.bodyUsed ?? false;
  }

  /**
   * The runtime's own response, with the headers as they are now. Headers read before it was
   * built are the ones it starts from; from now on `headers` is the built response's.
   */
  #build(): Response {
    return this.#built ??= new Response(this.#text, {
      status: this.#status,
      ...(this.#statusText !== undefined ? { statusText: this.#statusText } : {}),
      headers: this.#headers ?? this.#headersInit,
    });
  }

  // Every other member of the runtime's `Response` reads the built one: the list comes from
  // the runtime itself, so a member one runtime adds (`bytes()`) is covered wherever it exists,
  // and so is one it inherits (Workers keep the body's members on a `Body` prototype).
  static {
    const covered = new Set(['constructor', 'status', 'ok', 'headers', 'bodyUsed']);
    for (const [name, descriptor] of responseMembers()) {
      if (covered.has(name)) continue;
      covered.add(name);
      if (descriptor.get !== undefined) {
        Object.defineProperty(DeferredTextResponse.prototype, name, {
          get(this: DeferredTextResponse) {
            return (this.#build() as unknown as Record<string, unknown>)[name];
          },
          configurable: true,
        });
      } else if (typeof descriptor.value === 'function') {
        Object.defineProperty(DeferredTextResponse.prototype, name, {
          value(this: DeferredTextResponse, ...args: unknown[]) {
            const built = this.#build() as unknown as Record<string, (...a: unknown[]) => unknown>;
            return built[name](...args);
          },
          writable: true,
          configurable: true,
        });
      }
    }
    // `instanceof Response` holds, and nothing of `Response` is left undefined.
    Object.setPrototypeOf(DeferredTextResponse.prototype, Response.prototype);
  }
}

/**
 * A `Response` answering `text` with `init`'s status and headers, whose runtime response is
 * built only when a member other than `status`, `ok`, `headers` or `bodyUsed` is read.
 */
export function deferredTextResponse(text: string, init: ResponseInit): Response {
  return new DeferredTextResponse(text, init) as unknown as Response;
}
