// The events tab: one timeline, newest first, of what the agents saw happen to instances
// (InstanceEventService, read after a cursor whenever the live view says a newer event was
// recorded) and what the rollout did (its events per region, from the live view itself).
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { InstanceEvent } from "../gen/krane/ctrl/v1/events_pb.js";
import type { EnvironmentView } from "../gen/krane/ctrl/v1/live_pb.js";
import { api, errorText } from "./api.js";
import type { EnvRef } from "./router.js";
import { Table } from "./table.js";
import { clock } from "./util.js";

/** Instance events kept in the page (the newest). */
const KEEP = 2_000;

interface TimelineRow {
  key: string;
  at: number;
  source: string;
  region: string;
  what: string;
  detail: string;
  warning: boolean;
}

export function Events(props: { envRef: EnvRef; view: EnvironmentView }) {
  const [events, setEvents] = useState<InstanceEvent[]>([]);
  const [error, setError] = useState("");
  const cursor = useRef("");
  const busy = useRef(false);
  const { workspace, project, environment } = props.envRef;
  const target = props.view.eventsCursor;
  useEffect(() => {
    cursor.current = "";
    setEvents([]);
  }, [workspace, project, environment]);
  useEffect(() => {
    if (busy.current || target === cursor.current) return;
    busy.current = true;
    void (async () => {
      try {
        const got: InstanceEvent[] = [];
        let more = true;
        while (more) {
          const r = await api.events.listInstanceEvents({ workspace, project, environment, cursor: cursor.current });
          got.push(...r.events);
          more = r.more;
          cursor.current = r.cursor;
        }
        // An event whose facts changed comes again: the newer copy replaces the older.
        setEvents((old) => {
          const byId = new Map(
            old.map((e) => [`${e.deploymentId}/${e.region}/${e.instance}/${e.kind}/${e.reason}/${e.atUnixMs}`, e]),
          );
          for (const e of got)
            byId.set(`${e.deploymentId}/${e.region}/${e.instance}/${e.kind}/${e.reason}/${e.atUnixMs}`, e);
          return [...byId.values()].slice(-KEEP);
        });
        setError("");
      } catch (err) {
        setError(errorText(err));
      } finally {
        busy.current = false;
      }
    })();
  }, [target, workspace, project, environment]);

  const rows = useMemo(() => {
    const out: TimelineRow[] = events.map((e) => ({
      key: `i/${e.deploymentId}/${e.region}/${e.instance}/${e.kind}/${e.reason}/${e.atUnixMs}`,
      at: Number(e.atUnixMs),
      source: `r${e.revision} ${e.instance}`,
      region: e.region,
      what: `${e.kind}: ${e.reason}${e.exitCode !== undefined ? ` (exit ${e.exitCode})` : ""}${e.restarts ? `, ${e.restarts} restarts` : ""}`,
      detail: e.message,
      warning: true,
    }));
    for (const r of props.view.rollout?.regions ?? [])
      r.events.forEach((e, i) =>
        out.push({
          key: `r/${r.region}/${i}/${e.atUnixMs}`,
          at: Number(e.atUnixMs),
          source: "rollout",
          region: r.region,
          what: e.reason,
          detail: e.message,
          warning: e.type === "Warning",
        }),
      );
    return out.sort((a, b) => b.at - a.at);
  }, [events, props.view.rollout]);

  return (
    <>
      <h2>Events</h2>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <Table
        label="Events"
        rows={rows}
        rowKey={(r) => r.key}
        filter
        columns={[
          { key: "at", title: "When", value: (r) => r.at, render: (r) => clock(r.at) },
          { key: "region", title: "Region", value: (r) => r.region },
          { key: "source", title: "Source", value: (r) => r.source },
          {
            key: "what",
            title: "What",
            value: (r) => r.what,
            render: (r) => <span class={r.warning ? "warn" : ""}>{r.what}</span>,
          },
          { key: "detail", title: "Detail", value: (r) => r.detail },
        ]}
      />
    </>
  );
}
