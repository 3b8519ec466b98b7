import type { BuildOptions } from 'esbuild';

/** The compatibility date every Worker of the test suite runs with. */
export declare const WORKERD_COMPATIBILITY_DATE: string;
/** esbuild options for a Workers bundle (one ES module, written to memory). */
export declare const WORKERD_BUNDLE_OPTIONS: Readonly<BuildOptions & { write: false }>;
