// Table shapes of the rollout driver's state (migration 0002_rollouts): per environment and
// region, the Deployment-like record the engine works on; per revision and region, the
// ReplicaSet-like record (revision number, spec replicas, desired/max annotations); and recent
// rollout events. Same conventions as ../store/schema.ts (unix ms, JSON text).

/** One row per (environment, region): what Kubernetes keeps on the Deployment object. */
export interface RolloutsTable {
  environment_id: string;
  region: string;
  /** The revision the region should run (Kubernetes' new ReplicaSet); null until the first pass. */
  target_deployment_id: string | null;
  /** The environment's last_revision when the target was chosen: a newer deployment retargets. */
  target_seen_revision: number;
  /** Pending undo: null, 0 (previous revision) or a region revision number. */
  rollback_to: number | null;
  /** JSON of the engine's DeploymentStatus. */
  status: string;
  /** JSON of the engine's Condition[]. */
  conditions: string;
  /** The spec the last pass saw (see specKey); differs from the current one until observed. */
  observed_spec: string;
  /** When a pass must run even without events (progress deadline, minReadySeconds); null: none. */
  requeue_at: number | null;
  updated_at: number;
}

/** One row per (deployment, region) once the engine has sized the revision there. */
export interface RolloutRevisionsTable {
  deployment_id: string;
  environment_id: string;
  region: string;
  /** The region's revision number (renumbered on rollback, like the ReplicaSet annotation). */
  revision: number | null;
  replicas: number;
  desired_replicas: number | null;
  max_replicas: number | null;
}

export interface RolloutEventsTable {
  environment_id: string;
  region: string;
  seq: number;
  at: number;
  type: string;
  reason: string;
  message: string;
}
