// Progressive delivery's pure core: canary steps, blue-green, region waves, and the analysis
// judge. No I/O and no clock. README.md explains the rules; src/ctrl/rollout/progressive.ts runs it.
export * from "./types.js";
export {
  analysisRequest,
  canaryReplicas,
  decide,
  EMPTY_ANALYSIS,
  INITIAL_STATE,
  regionDecision,
  safeWeights,
  wavesOf,
  weightAt,
} from "./engine.js";
export { judge, p99Ms, successRate, type Judgement } from "./judge.js";
export { checkRules, checkSpec, formatSpec, parseStoredSpec, PROGRESSIVE_LIMITS, SpecProblem } from "./validate.js";
