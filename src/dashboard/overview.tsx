// The overview: every environment the caller may read with its live state, and the clusters
// with when their agent was last seen and their backlog. Pushed by LiveService.WatchOverview:
// the whole first, then only what changed.
import { useMemo, useState } from "preact/hooks";
import type { Cluster } from "../gen/krane/ctrl/v1/api_pb.js";
import type { EnvironmentSummary } from "../gen/krane/ctrl/v1/live_pb.js";
import { api } from "./api.js";
import { LiveBadge, useLiveStream } from "./live.js";
import { Table, type Column } from "./table.js";
import { ago } from "./util.js";

export interface EnvRow {
  id: string;
  workspace: string;
  project: string;
  environment: string;
  regions: string;
  replicas: number;
  running: number;
  state: string;
  revision: number;
  image: string;
  updated: number;
}

function row(s: EnvironmentSummary): EnvRow {
  return {
    id: s.environmentId,
    workspace: s.workspace,
    project: s.project,
    environment: s.environment,
    regions: s.regions.map((r) => `${r.region}=${r.replicas}`).join(", "),
    replicas: s.regions.reduce((n, r) => n + r.replicas, 0),
    running: s.running,
    state: s.state,
    revision: Number(s.revision),
    image: s.image,
    updated: Number(s.updatedAtUnixMs),
  };
}

const STATE_CLASS: Record<string, string> = { complete: "ok", failed: "bad", paused: "warn", progressing: "warn" };

const ENV_COLUMNS: Column<EnvRow>[] = [
  { key: "ws", title: "Workspace", value: (r) => r.workspace },
  {
    key: "env",
    title: "Environment",
    value: (r) => `${r.project}/${r.environment}`,
    render: (r) => (
      <a href={`#/env/${[r.workspace, r.project, r.environment].map(encodeURIComponent).join("/")}`}>
        {r.project}/{r.environment}
      </a>
    ),
  },
  {
    key: "state",
    title: "State",
    value: (r) => r.state,
    render: (r) => <span class={STATE_CLASS[r.state] ?? "muted"}>{r.state}</span>,
  },
  { key: "running", title: "Running", value: (r) => r.running },
  { key: "replicas", title: "Replicas", value: (r) => r.replicas },
  { key: "regions", title: "Regions (replicas)", value: (r) => r.regions },
  { key: "rev", title: "Revision", value: (r) => r.revision, render: (r) => (r.revision ? `r${r.revision}` : "") },
  { key: "image", title: "Image", value: (r) => r.image },
  { key: "updated", title: "Updated", value: (r) => r.updated, render: (r) => ago(r.updated) },
];

const CLUSTER_COLUMNS: Column<Cluster>[] = [
  { key: "region", title: "Region", value: (c) => c.region },
  { key: "name", title: "Cluster", value: (c) => c.name },
  {
    key: "seen",
    title: "Last seen",
    value: (c) => Number(c.lastHeartbeatUnixMs),
    render: (c) => {
      const stale = Date.now() - Number(c.lastHeartbeatUnixMs) > 60_000;
      return <span class={stale ? "bad" : "ok"}>{ago(c.lastHeartbeatUnixMs)}</span>;
    },
  },
  { key: "behind", title: "Backlog (changes)", value: (c) => Number(c.changesBehind) },
  { key: "build", title: "Agent build", value: (c) => c.build },
];

/** `installation`: the session is an installation token's; a workspace's sees no clusters. */
export function Overview(props: { installation: boolean }) {
  // The rows by environment id, replaced (never mutated) on each change so the table sees it.
  const [rows, setRows] = useState<Map<string, EnvRow> | undefined>(undefined);
  const [clusters, setClusters] = useState<Cluster[]>([]);
  const { state, error } = useLiveStream(
    (signal) => api.live.watchOverview({}, { signal }),
    (m) => {
      if (!m.reset && m.environments.length === 0 && m.removedEnvironmentIds.length === 0 && !m.clustersChanged) return; // a keepalive
      setRows((old) => {
        const next = new Map(m.reset || !old ? [] : old);
        for (const s of m.environments) next.set(s.environmentId, row(s));
        for (const id of m.removedEnvironmentIds) next.delete(id);
        return next;
      });
      if (m.clustersChanged) setClusters(m.clusters);
    },
    [],
  );
  const list = useMemo(() => (rows ? [...rows.values()] : []), [rows]);
  return (
    <main>
      <h2>
        Environments <LiveBadge state={state} />
      </h2>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {rows ? (
        <Table label="Environments" rows={list} columns={ENV_COLUMNS} rowKey={(r) => r.id} filter />
      ) : (
        <p class="muted">Loading…</p>
      )}
      {props.installation && (
        <>
          <h2>Clusters</h2>
          <Table label="Clusters" rows={clusters} columns={CLUSTER_COLUMNS} rowKey={(c) => c.id} />
        </>
      )}
    </main>
  );
}
