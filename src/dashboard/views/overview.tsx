/** @jsxRuntime automatic @jsxImportSource preact */
// The overview: every environment the caller may read with its live state, and the clusters
// with when their agent was last seen and their backlog. Pushed by LiveService.WatchOverview:
// the whole first, then only what changed.
import { useMemo, useState } from "preact/hooks";
import type { Cluster } from "../../gen/krane/ctrl/v1/api_pb.js";
import { api } from "../api.js";
import { LiveBadge, Toned } from "../components/badge.js";
import { Table, type Column } from "../components/table.js";
import { ago } from "../format.js";
import { useLiveStream } from "../live.js";
import { envHash } from "../router.js";
import { applyOverview, envStateTone, isKeepalive, isStale, type EnvRow } from "./overview-model.js";

const ENV_COLUMNS: Column<EnvRow>[] = [
  { key: "ws", title: "Workspace", value: (r) => r.workspace },
  {
    key: "env",
    title: "Environment",
    value: (r) => `${r.project}/${r.environment}`,
    render: (r) => (
      <a href={envHash(r)}>
        {r.project}/{r.environment}
      </a>
    ),
  },
  {
    key: "state",
    title: "State",
    value: (r) => r.state,
    render: (r) => <Toned tone={envStateTone(r.state)}>{r.state}</Toned>,
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
    render: (c) => <Toned tone={isStale(c) ? "bad" : "ok"}>{ago(c.lastHeartbeatUnixMs)}</Toned>,
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
      if (isKeepalive(m)) return;
      setRows((old) => applyOverview(old, m));
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
        <Table
          label="Environments"
          empty={
            <>
              No environment yet: create one with{" "}
              <code>krane env create &lt;project&gt;/&lt;env&gt; --region &lt;region&gt;=1</code>, or apply a krane.yaml
              with <code>krane apply -f krane.yaml</code>.
            </>
          }
          rows={list}
          columns={ENV_COLUMNS}
          rowKey={(r) => r.id}
          filter
        />
      ) : (
        <p class="muted">Loading…</p>
      )}
      {props.installation && (
        <>
          <h2>Clusters</h2>
          <Table
            label="Clusters"
            empty={
              <>
                No cluster has connected: run an agent for each region with a token from{" "}
                <code>krane cluster-token create &lt;region&gt;</code> (the Helm chart, or <code>krane agent</code>).
              </>
            }
            rows={clusters}
            columns={CLUSTER_COLUMNS}
            rowKey={(c) => c.id}
          />
        </>
      )}
    </main>
  );
}
