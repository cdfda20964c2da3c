/** @jsxRuntime automatic @jsxImportSource preact */
// The logs tab: LogService.StreamLogs (the same stream `krane logs` reads, merged across
// instances and regions by time), with follow and filters. Region, revision and instance go to
// ctrl (it asks only the agents concerned); the text filter applies in the page. The page keeps
// the newest KEEP_LINES lines and draws the newest SHOW_LINES that match (logs-model.ts).
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { LogEntry } from "../../../gen/krane/ctrl/v1/logs_pb.js";
import type { EnvironmentView } from "../../../gen/krane/ctrl/v1/live_pb.js";
import { api, errorText, isFinal, isSignedOut } from "../../api.js";
import { backoffMs } from "../../live.js";
import type { EnvRef } from "../../router.js";
import { entryMs, KEEP_LINES, logFilters, logLine, matchingLines, type Line } from "./logs-model.js";

export function Logs(props: { envRef: EnvRef; view: EnvironmentView }) {
  const [follow, setFollow] = useState(true);
  const [region, setRegion] = useState("");
  const [revision, setRevision] = useState("");
  const [instance, setInstance] = useState("");
  const [text, setText] = useState("");
  const [lines, setLines] = useState<Line[]>([]);
  const [state, setState] = useState("");
  const box = useRef<HTMLDivElement>(null);
  const counter = useRef(0);
  const { workspace, project, environment } = props.envRef;
  useEffect(() => {
    const stop = new AbortController();
    setLines([]);
    void (async () => {
      let attempt = 0;
      let since = 0;
      while (!stop.signal.aborted) {
        setState(follow ? "following…" : "reading…");
        try {
          const stream = api.logs.streamLogs(
            {
              workspace,
              project,
              environment,
              follow,
              region,
              instance,
              revision: BigInt(revision === "" ? 0 : Number(revision)),
              // A resumed stream starts where the last left off.
              ...(since > 0 ? { sinceUnixMs: BigInt(since) } : { tailLines: 200 }),
            },
            { signal: stop.signal },
          );
          for await (const batch of stream) {
            attempt = 0;
            const add = batch.entries.map((e: LogEntry) => {
              since = Math.max(since, entryMs(e) + 1);
              return logLine(e, counter.current++);
            });
            setLines((old) => [...old, ...add].slice(-KEEP_LINES));
          }
          setState(follow ? "reconnecting…" : "done");
          if (!follow) return;
        } catch (err) {
          if (stop.signal.aborted) return;
          if (isSignedOut(err)) location.reload();
          setState(errorText(err));
          if (isFinal(err)) return;
        }
        await new Promise((r) => setTimeout(r, backoffMs(attempt++)));
      }
    })();
    return () => stop.abort();
  }, [workspace, project, environment, follow, region, revision, instance]);

  const shown = useMemo(() => matchingLines(lines, text), [lines, text]);
  useEffect(() => {
    if (follow && box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [shown, follow]);

  const { regions, revisions, instances } = logFilters(props.view);
  return (
    <>
      <h2>Logs</h2>
      <div class="actions">
        <label>
          Region
          <select value={region} onChange={(e) => setRegion(e.currentTarget.value)}>
            <option value="">every region</option>
            {regions.map((r) => (
              <option key={r}>{r}</option>
            ))}
          </select>
        </label>
        <label>
          Revision
          <select value={revision} onChange={(e) => setRevision(e.currentTarget.value)}>
            <option value="">every revision</option>
            {revisions.map((r) => (
              <option key={r} value={r}>
                r{r}
              </option>
            ))}
          </select>
        </label>
        <label>
          Instance
          <select value={instance} onChange={(e) => setInstance(e.currentTarget.value)}>
            <option value="">every instance</option>
            {instances.map((i) => (
              <option key={i}>{i}</option>
            ))}
          </select>
        </label>
        <label>
          Text
          <input type="search" value={text} onInput={(e) => setText(e.currentTarget.value)} />
        </label>
        <label class="inline">
          <input type="checkbox" checked={follow} onChange={(e) => setFollow(e.currentTarget.checked)} /> Follow
        </label>
        <span class="muted" role="status">
          {state} {shown.length} of {lines.length} lines
        </span>
      </div>
      <div class="logs" ref={box} role="log" aria-label="Log lines" tabIndex={0}>
        {shown.map((l) => (
          <div key={l.n} class={l.marker ? "muted" : ""}>
            <span class="muted">{l.time}</span> <span class="muted">{l.source}</span> {l.text}
          </div>
        ))}
      </div>
    </>
  );
}
