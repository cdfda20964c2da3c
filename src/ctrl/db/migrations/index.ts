// Every migration, by the name Kysely records for it in `krane_migrations`. The name is the
// file's name: add `NNNN_what.ts` next to the others (the next number, snake_case) and one line
// here. Names already recorded by a shipped release never change (test/unit/ctrl/migrations.test.ts
// holds them to the files and to the names release be3ed9d recorded).
import { migration as m0001 } from "./0001_initial.js";
import { migration as m0002 } from "./0002_rollouts.js";
import { migration as m0003 } from "./0003_commit_sequencer.js";
import { migration as m0004 } from "./0004_api_tokens.js";
import { migration as m0005 } from "./0005_revoked_tokens.js";
import { migration as m0006 } from "./0006_desired_replicas.js";
import { migration as m0007 } from "./0007_routing.js";
import { migration as m0008 } from "./0008_exposure.js";
import { migration as m0009 } from "./0009_releases_config_deletion.js";
import { migration as m0010a } from "./0010_a_idempotency_keys.js";
import { migration as m0010b } from "./0010_b_cluster_cursors.js";
import { migration as m0011 } from "./0011_progressive.js";
import { migration as m0012 } from "./0012_measurements.js";
import { migration as m0013 } from "./0013_deployment_page_indexes.js";
import { migration as m0014 } from "./0014_idempotency_subject.js";
import { migration as m0015 } from "./0015_routing_in_one_place.js";
import { migration as m0020 } from "./0020_audit_events.js";
import { migration as m0021 } from "./0021_previews.js";
import { migration as m0022 } from "./0022_instance_events.js";
import { migration as m0024 } from "./0024_deployment_protocol.js";
import { migration as m0025 } from "./0025_autoscaling.js";
import { migration as m0026 } from "./0026_dashboard_sessions.js";
import { migration as m0027 } from "./0027_workspace_tokens.js";
import { migration as m0028 } from "./0028_image_digests_registries.js";
import { migration as m0029 } from "./0029_instant_rollback.js";
import { migration as m0030 } from "./0030_notifications.js";
import { migration as m0031 } from "./0031_members.js";
import { migration as m0032 } from "./0032_builds.js";
import { migration as m0033 } from "./0033_member_sessions.js";
import { migration as m0034 } from "./0034_quotas.js";
import { migration as m0035 } from "./0035_edge_policies.js";
import { migration as m0036 } from "./0036_metric_history.js";
import { migration as m0038 } from "./0038_session_addresses.js";
import { migration as m0041 } from "./0041_log_history.js";
import { migration as m0042 } from "./0042_alert_rules.js";
import { migration as m0043 } from "./0043_repositories.js";
import { migration as m0044 } from "./0044_api_keys.js";
import { migration as m0045 } from "./0045_pull_request_builds.js";
import { migration as m0046 } from "./0046_alert_windows.js";
import { migration as m0048 } from "./0048_log_archive_leases.js";
import type { KraneMigration } from "./migration.js";

export type { KraneMigration, MigrationDialect } from "./migration.js";

export const MIGRATIONS: Readonly<Record<string, KraneMigration>> = {
  "0001_initial": m0001,
  "0002_rollouts": m0002,
  "0003_commit_sequencer": m0003,
  "0004_api_tokens": m0004,
  "0005_revoked_tokens": m0005,
  "0006_desired_replicas": m0006,
  "0007_routing": m0007,
  "0008_exposure": m0008,
  "0009_releases_config_deletion": m0009,
  "0010_a_idempotency_keys": m0010a,
  "0010_b_cluster_cursors": m0010b,
  "0011_progressive": m0011,
  "0012_measurements": m0012,
  "0013_deployment_page_indexes": m0013,
  "0014_idempotency_subject": m0014,
  "0015_routing_in_one_place": m0015,
  "0020_audit_events": m0020,
  "0021_previews": m0021,
  "0022_instance_events": m0022,
  "0024_deployment_protocol": m0024,
  "0025_autoscaling": m0025,
  "0026_dashboard_sessions": m0026,
  "0027_workspace_tokens": m0027,
  "0028_image_digests_registries": m0028,
  "0029_instant_rollback": m0029,
  "0030_notifications": m0030,
  "0031_members": m0031,
  "0032_builds": m0032,
  "0033_member_sessions": m0033,
  "0034_quotas": m0034,
  "0035_edge_policies": m0035,
  "0036_metric_history": m0036,
  "0038_session_addresses": m0038,
  "0041_log_history": m0041,
  "0042_alert_rules": m0042,
  "0043_repositories": m0043,
  "0044_api_keys": m0044,
  "0045_pull_request_builds": m0045,
  "0046_alert_windows": m0046,
  "0048_log_archive_leases": m0048,
};
