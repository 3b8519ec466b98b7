// DOS-08 over a real socket against serveDeno (the cases: ../framed-body-scenarios.ts).
import { serveDeno } from '../../../src/adapters/deno.ts';
import { framedBodyScenarios } from '../framed-body-scenarios.ts';

framedBodyScenarios('serveDeno', (target) => serveDeno(target), {
  closesOwedBodyConnection: false,
});
