/**
 * What a batch session's outputs may hold. Ending a Cap'n Web session disposes what it
 * exported; for an HTTP batch that costs a walk of every session table per request, and it
 * disposes something only when a call returned more than plain data. This record tells the two
 * apart, counting the calls whose output is not known yet.
 *
 * @module
 */
import { isPlainData } from './plain-data.ts';

/** One batch session's record of its outputs. */
export class ResourceOutputs {
  #seen = false;
  #pending = 0;

  /** `output`, noted when it holds more than plain data. */
  noted(output: unknown): unknown {
    if (!this.#seen && !isPlainData(output)) this.#seen = true;
    return output;
  }

  /** `outcome`, counted as pending until it settles when it is a promise. */
  counted<T>(outcome: T): T {
    if (!(outcome instanceof Promise)) return outcome;
    this.#pending++;
    outcome.then(() => {
      this.#pending--;
    }, () => {
      this.#pending--;
    });
    return outcome;
  }

  /** Whether every output is known and was plain data: the session has nothing to dispose. */
  allPlainData(): boolean {
    return !this.#seen && this.#pending === 0;
  }
}
