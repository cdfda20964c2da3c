// krane's rollout engine.
//
// Owns the Kubernetes Deployment controller's semantics over krane's model: in each
// region an environment behaves like one Deployment whose ReplicaSets are the environment's
// deployments (revisions). `planRollout` runs one pass of the controller's sync — rolling update,
// recreate, proportional scaling, pause/resume, rollback, revision-history cleanup, the
// Available/Progressing conditions and the progress deadline — and returns the new replica counts,
// status, conditions and events. Pure: no I/O, no clock (`now` is an input); ctrl applies the
// output. `parseRolloutInput` validates untrusted JSON (the `krane rollout plan` format).
//
// Contract with the caller (ctrl), where Kubernetes relies on its API server:
// - Run another pass whenever a pass changed anything (target, sizes, status, conditions): in
//   Kubernetes the controller's own writes trigger the next sync. One pass does one step.
// - `requeueAfterSeconds` is set only when a pass changed nothing and a progress deadline is
//   pending: run a pass then (0 = soon, rate-limited). Otherwise it is null.
// - `rollbackTo` is consumed by any pass of an unpaused deployment; clear it after such a pass.
// - A revision's `status.replicas` counts its pods that are neither terminal nor terminating (as a
//   ReplicaSet's does), `terminatingReplicas` the ones shutting down, and `availableReplicas`
//   already applies minReadySeconds; Recreate waits until both counts of old revisions are 0.
//   README.md says what ctrl counts today and how the engine is checked against Kubernetes.
// - `revision: null` means the region has no ReplicaSet for that revision yet; the engine creates
//   the target's (NewReplicaSetCreated) and numbers it max(old revisions) + 1.
export { planRollout } from "./engine.js";
export { RolloutInputError, parseRolloutInput, parseRolloutInputText } from "./parse.js";
export type * from "./types.js";
