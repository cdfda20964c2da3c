/** @jsxRuntime automatic @jsxImportSource preact */
// The status tab's last tables: the instances (per region, with their state and last event), the
// sentinels (the routing version they serve against the desired one) and the clusters of the
// environment's regions.
import type { EnvironmentView } from "../../../gen/krane/ctrl/v1/live_pb.js";
import { Toned } from "../../components/badge.js";
import { Table } from "../../components/table.js";
import { ago } from "../../format.js";
import { instanceRows } from "./status-model.js";

export function Instances(props: { view: EnvironmentView }) {
  return (
    <>
      <h2>Instances</h2>
      <Table
        label="Instances"
        empty={
          <>
            No instance: deploy a revision with <code>krane deploy &lt;project/env&gt; --image &lt;image&gt;</code> (an
            environment scaled to zero has none until a request comes).
          </>
        }
        rows={instanceRows(props.view)}
        rowKey={(r) => r.key}
        filter
        columns={[
          { key: "region", title: "Region", value: (r) => r.region },
          { key: "name", title: "Instance", value: (r) => r.name },
          { key: "rev", title: "Revision", value: (r) => r.revision },
          {
            key: "state",
            title: "State",
            value: (r) => r.state,
            render: (r) => <Toned tone={r.state === "running" ? "ok" : "warn"}>{r.state}</Toned>,
          },
          {
            key: "event",
            title: "Last event",
            value: (r) => r.event,
            render: (r) => <span title={r.eventTitle}>{r.event}</span>,
          },
          { key: "node", title: "Node", value: (r) => r.node },
        ]}
      />
    </>
  );
}

export function Sentinels(props: { view: EnvironmentView }) {
  return (
    <>
      <h2>Sentinels</h2>
      <Table
        label="Sentinels"
        empty={
          <>
            No sentinel has reported: they start with the environment (none when it was made with{" "}
            <code>--no-sentinel</code>).
          </>
        }
        rows={props.view.status?.sentinels ?? []}
        rowKey={(s) => s.sentinelId + s.region}
        columns={[
          { key: "region", title: "Region", value: (s) => s.region },
          { key: "avail", title: "Available / desired", value: (s) => `${s.availableReplicas}/${s.desiredReplicas}` },
          {
            key: "routing",
            title: "Routing version served / desired",
            value: (s) => `${s.servedRoutingVersion}/${s.routingVersion}`,
            render: (s) => (
              <Toned tone={s.servedRoutingVersion === s.routingVersion ? "ok" : "warn"}>
                {String(s.servedRoutingVersion)}/{String(s.routingVersion)}
              </Toned>
            ),
          },
          { key: "address", title: "Address", value: (s) => s.address },
          {
            key: "seen",
            title: "Reported",
            value: (s) => Number(s.reportedAtUnixMs),
            render: (s) => ago(s.reportedAtUnixMs),
          },
        ]}
      />
    </>
  );
}

export function Clusters(props: { view: EnvironmentView }) {
  return (
    <>
      <h2>Clusters</h2>
      <Table
        label="Clusters of the environment's regions"
        empty={
          <>
            No cluster serves these regions yet, so nothing runs here: connect an agent with{" "}
            <code>krane cluster-token create &lt;region&gt;</code>.
          </>
        }
        rows={props.view.status?.clusters ?? []}
        rowKey={(c) => c.id}
        columns={[
          { key: "region", title: "Region", value: (c) => c.region },
          { key: "name", title: "Cluster", value: (c) => c.name },
          {
            key: "seen",
            title: "Last seen",
            value: (c) => Number(c.lastHeartbeatUnixMs),
            render: (c) => ago(c.lastHeartbeatUnixMs),
          },
          { key: "behind", title: "Backlog (changes)", value: (c) => Number(c.changesBehind) },
        ]}
      />
    </>
  );
}
