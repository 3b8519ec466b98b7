/**
 * The part of the `cloudflare:workers` module the binding test Workers use. The module exists
 * only inside workerd (the bundler leaves it external), and the project does not depend on the
 * Workers type package, so its shape is declared here for the type checker.
 */
declare module 'cloudflare:workers' {
  /**
   * A named or default entrypoint of a Worker: its public methods are callable over a service
   * binding with JS RPC; `env` holds the Worker's bindings, `ctx` its execution context.
   */
  export abstract class WorkerEntrypoint<Env = unknown> {
    protected env: Env;
    protected ctx: unknown;
    constructor(ctx: unknown, env: Env);
    fetch?(request: Request): Response | Promise<Response>;
  }
}
