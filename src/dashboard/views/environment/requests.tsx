/** @jsxRuntime automatic @jsxImportSource preact */
// The requests tab: LogService.StreamRequests (the live request view `krane requests -f` reads):
// requests through the environment's sentinels as they finish, sampled, with no header and no
// query value; the newest KEEP_REQUESTS in a table, newest first. The sentinels record only while
// a view is open.
import { useRef, useState } from "preact/hooks";
import { api } from "../../api.js";
import { LiveBadge } from "../../components/badge.js";
import { Table } from "../../components/table.js";
import { useLiveStream } from "../../live.js";
import type { EnvRef } from "../../router.js";
import { KEEP_REQUESTS, requestRow, type RequestRow } from "./edge-model.js";

export function Requests(props: { envRef: EnvRef }) {
  const { workspace, project, environment } = props.envRef;
  const [rows, setRows] = useState<RequestRow[]>([]);
  const counter = useRef(0);
  const { state, error } = useLiveStream(
    (signal) => api.logs.streamRequests({ workspace, project, environment }, { signal, timeoutMs: 0 }),
    (batch) => {
      const add = batch.entries.map((e) => requestRow(e, counter.current++));
      setRows((old) => [...add.reverse(), ...old].slice(0, KEEP_REQUESTS));
    },
    [workspace, project, environment],
  );
  return (
    <>
      <h2>
        Requests <LiveBadge state={state} />
      </h2>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <p class="muted">
        Sampled (at most 50 a second per region); no header, and query values shown as “…”. The same view:{" "}
        <code>
          krane requests -f {project}/{environment}
        </code>
        .
      </p>
      <Table
        label="Requests"
        empty={<>No request yet: requests through the environment's sentinels show here as they pass.</>}
        rows={rows}
        rowKey={(r) => String(r.n)}
        columns={[
          { key: "time", title: "Time (UTC)", value: (r) => r.time },
          { key: "region", title: "Region", value: (r) => r.region },
          { key: "method", title: "Method", value: (r) => r.method },
          { key: "status", title: "Status", value: (r) => r.status },
          { key: "latency", title: "Latency", value: (r) => r.latency },
          { key: "path", title: "Path", value: (r) => r.path, wrap: true },
          { key: "by", title: "Answered by", value: (r) => r.by },
          { key: "client", title: "Client", value: (r) => r.client },
          { key: "key", title: "API key", value: (r) => r.key },
        ]}
      />
    </>
  );
}
