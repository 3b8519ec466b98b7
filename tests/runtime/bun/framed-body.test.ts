// DOS-08 over a real socket against serveBun (the cases: ../framed-body-scenarios.ts).
import { serveBun } from '../../../src/adapters/bun.ts';
import { framedBodyScenarios } from '../framed-body-scenarios.ts';

framedBodyScenarios('serveBun', (target) => serveBun(target));
