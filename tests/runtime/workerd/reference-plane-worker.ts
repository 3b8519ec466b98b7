/**
 * A Worker serving a control plane with its API reference page, Swagger UI's files imported as
 * text modules, as a Workers project does with a wrangler `Text` rule. The signing key is a JSON
 * binding; the plane has no services (the page needs none).
 */
import bundle from 'swagger-ui-dist/swagger-ui-bundle.js';
import css from 'swagger-ui-dist/swagger-ui.css';
import { type ControlPlane, createControlPlane } from '../../../src/plane/mod.ts';
import type { SigningKeyEntry } from '../../../src/plane/signing-keys.ts';

let plane: ControlPlane | undefined;

export default {
  fetch(request: Request, env: { SIGNING_KEY: SigningKeyEntry }): Promise<Response> {
    plane ??= createControlPlane({
      signingKeys: [env.SIGNING_KEY],
      services: [],
      openapi: {
        reference: { assets: { 'swagger-ui-bundle.js': bundle, 'swagger-ui.css': css } },
      },
    });
    return plane.fetch(request, env);
  },
};
