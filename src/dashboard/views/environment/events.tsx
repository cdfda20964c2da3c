/** @jsxRuntime automatic @jsxImportSource preact */
// The events tab: one timeline, newest first, of what the agents saw happen to instances
// (InstanceEventService, read after a cursor whenever the live view says a newer event was
// recorded) and what the rollout did (its events per region, from the live view itself).
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { InstanceEvent } from "../../../gen/krane/ctrl/v1/events_pb.js";
import type { EnvironmentView } from "../../../gen/krane/ctrl/v1/live_pb.js";
import { api, errorText } from "../../api.js";
import { Toned } from "../../components/badge.js";
import { Table } from "../../components/table.js";
import { clock } from "../../format.js";
import type { EnvRef } from "../../router.js";
import { mergeEvents, timeline } from "./events-model.js";

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
        setEvents((old) => mergeEvents(old, got));
        setError("");
      } catch (err) {
        setError(errorText(err));
      } finally {
        busy.current = false;
      }
    })();
  }, [target, workspace, project, environment]);

  const rows = useMemo(() => timeline(events, props.view.rollout), [events, props.view.rollout]);

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
        empty="No event yet: crashes, OOM kills, image pull errors and rollout steps appear here as they happen."
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
            render: (r) => <Toned tone={r.warning ? "warn" : ""}>{r.what}</Toned>,
          },
          { key: "detail", title: "Detail", value: (r) => r.detail },
        ]}
      />
    </>
  );
}
