/** @jsxRuntime automatic @jsxImportSource preact */
// The audit page: ListAuditEvents of one chain (a workspace's, or the installation's), newest
// first, with what each accepted change changed (secrets and tokens: only that they changed).
// Reading it needs the admin role: a session below it is told so and nothing is asked of ctrl.
// The page writes nothing (its buttons open an event's details or read again).
import { useContext, useEffect, useState } from "preact/hooks";
import { AuditService, type AuditEvent } from "../../gen/krane/ctrl/v1/audit_pb.js";
import { api, errorText, workspaceSlugs } from "../api.js";
import { Toned } from "../components/badge.js";
import { Table } from "../components/table.js";
import { clock } from "../format.js";
import { all } from "../paging.js";
import { hiddenNote, RoleContext } from "../permissions.js";
import { auditBody, auditFilter, chainOptions, firstChain, hasDetails } from "./audit-model.js";

/** Pages of 1,000 read at most (the newest 10,000 events of a chain are enough for a page). */
const MAX_PAGES = 10;

/** The events of one chain under one filter, or ctrl's refusal; `of` names which. */
interface Loaded {
  of: string;
  events?: AuditEvent[];
  error: string;
}

/**
 * `chain`: the chain the route names ("" for the first, "*" for the installation's; the route
 * mounts the page keyed by it). `installation`: the session is an installation token's; a
 * workspace's is not offered the installation's chain (ctrl would refuse it).
 */
export function Audit(props: { chain: string; installation: boolean }) {
  const hidden = hiddenNote(useContext(RoleContext), [["Reading the audit log", AuditService.method.listAuditEvents]]);
  const [workspaces, setWorkspaces] = useState<string[]>();
  const [chain, setChain] = useState(props.chain);
  const [refusedOnly, setRefusedOnly] = useState(false);
  const [listError, setListError] = useState("");
  const [tick, setTick] = useState(0);
  // What is shown belongs to one chain and filter: an answer for another is never shown under it.
  const of = JSON.stringify([chain, refusedOnly]);
  const [loaded, setLoaded] = useState<Loaded>({ of: "", error: "" });
  const [open, setOpen] = useState<{ of: string; event: AuditEvent }>();
  useEffect(() => {
    void workspaceSlugs().then(
      (ws) => {
        setWorkspaces(ws);
        if (chain === "") setChain(firstChain(ws, props.installation));
      },
      (err: unknown) => setListError(errorText(err)),
    );
  }, []);
  useEffect(() => {
    if (chain === "" || hidden !== undefined) return;
    let current = true;
    const filter = auditFilter(chain, refusedOnly);
    void all(async (pageToken) => {
      const r = await api.audit.listAuditEvents({ filter, pageToken, pageSize: 1000 });
      return { items: r.events, next: r.nextPageToken };
    }, MAX_PAGES).then(
      (evs) => current && setLoaded({ of, events: evs.reverse(), error: "" }),
      // A refusal ends the loading: it is shown instead of the events.
      (err: unknown) => current && setLoaded({ of, error: errorText(err) }),
    );
    return () => {
      current = false;
    };
  }, [chain, refusedOnly, tick]);
  const mine = loaded.of === of ? loaded : undefined;
  const events = mine?.events;
  const error = listError || mine?.error || "";
  const detail = open?.of === of ? open.event : undefined;
  const body = auditBody(error, chain, workspaces, events);
  if (hidden !== undefined)
    return (
      <main>
        <h2>Audit log</h2>
        <p class="muted" role="note">
          {hidden}
        </p>
      </main>
    );
  return (
    <main>
      <h2>Audit log</h2>
      <div class="actions">
        <label>
          Chain
          <select value={chain} onChange={(e) => setChain(e.currentTarget.value)}>
            {chainOptions(workspaces ?? [], chain, props.installation).map((o) => (
              <option key={o.value} value={o.value}>
                {o.label}
              </option>
            ))}
          </select>
        </label>
        <label class="inline">
          <input type="checkbox" checked={refusedOnly} onChange={(e) => setRefusedOnly(e.currentTarget.checked)} />{" "}
          Refused calls only
        </label>
        <button type="button" onClick={() => setTick((t) => t + 1)}>
          Refresh
        </button>
      </div>
      {body === "refused" ? (
        <p class="error" role="alert">
          {error}
        </p>
      ) : body === "none" ? (
        <p class="muted">No workspace has an audit chain to show.</p>
      ) : events === undefined ? (
        <p class="muted">Loading…</p>
      ) : (
        <Table
          label="Audit events"
          empty="No audit event in this range: every change made through the API is recorded here."
          rows={events}
          rowKey={(e) => e.id}
          filter
          columns={[
            { key: "seq", title: "#", value: (e) => Number(e.seq) },
            { key: "at", title: "When", value: (e) => Number(e.atUnixMs), render: (e) => clock(e.atUnixMs) },
            { key: "actor", title: "Actor", wrap: true, value: (e) => `${e.actor?.kind ?? ""} ${e.actor?.name ?? ""}` },
            { key: "method", title: "Method", wrap: true, value: (e) => e.method },
            { key: "targets", title: "Targets", wrap: true, value: (e) => e.targets.join(", ") },
            {
              key: "code",
              title: "Result",
              value: (e) => e.code,
              render: (e) => <Toned tone={e.code === "ok" ? "ok" : "bad"}>{e.code}</Toned>,
            },
            {
              key: "changes",
              title: "Changes",
              value: (e) => e.changes.length,
              render: (e) =>
                hasDetails(e) ? (
                  <button
                    type="button"
                    aria-label={`Details of event ${e.seq}`}
                    onClick={() => setOpen({ of, event: e })}
                  >
                    Details
                  </button>
                ) : (
                  ""
                ),
            },
          ]}
        />
      )}
      {detail && (
        <section aria-label={`Event ${detail.seq}`}>
          <h3>
            Event {String(detail.seq)}: {detail.method} ({detail.code})
          </h3>
          {detail.message && <p>{detail.message}</p>}
          <table class="diff" aria-label="What the change changed">
            <thead>
              <tr>
                <th scope="col">Field</th>
                <th scope="col">Change</th>
                <th scope="col">Before</th>
                <th scope="col">After</th>
              </tr>
            </thead>
            <tbody>
              {detail.changes.map((c) => (
                <tr key={c.field}>
                  <td>{c.field}</td>
                  <td>{c.op}</td>
                  <td>{c.beforeJson}</td>
                  <td>{c.afterJson}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <button type="button" onClick={() => setOpen(undefined)}>
            Close
          </button>
        </section>
      )}
    </main>
  );
}
