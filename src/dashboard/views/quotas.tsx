/** @jsxRuntime automatic @jsxImportSource preact */
// The quotas page: a workspace's quotas with what it uses against each limit (QuotaService's
// GetQuota, the read `krane quota get` makes). A limit set below use shows as over. Every role
// may read it, and the page writes nothing (setting quotas is `krane quota set`, the owner's), so
// it hides nothing.
import { useEffect, useState } from "preact/hooks";
import type { Quota } from "../../gen/krane/ctrl/v1/quota_pb.js";
import { api, errorText, workspaceSlugs } from "../api.js";
import { Toned } from "../components/badge.js";
import { Table } from "../components/table.js";
import { auditBody, chainOptions, firstChain } from "./audit-model.js";
import { percentText, quotaRows, quotaTone } from "./quotas-model.js";

/** One workspace's quotas, or ctrl's refusal; `of` names which workspace. */
interface Loaded {
  of: string;
  quotas?: Quota[];
  error: string;
}

/** `workspace`: the one the route names ("" for the first listed; the route mounts the page keyed by it). */
export function Quotas(props: { workspace: string }) {
  const [workspaces, setWorkspaces] = useState<string[]>();
  const [workspace, setWorkspace] = useState(props.workspace);
  const [listError, setListError] = useState("");
  const [tick, setTick] = useState(0);
  const [loaded, setLoaded] = useState<Loaded>({ of: "", error: "" });
  useEffect(() => {
    void workspaceSlugs().then(
      (ws) => {
        setWorkspaces(ws);
        if (workspace === "") setWorkspace(firstChain(ws, false));
      },
      (err: unknown) => setListError(errorText(err)),
    );
  }, []);
  useEffect(() => {
    if (workspace === "") return;
    let current = true;
    void api.quotas.getQuota({ workspace }).then(
      (r) => current && setLoaded({ of: workspace, quotas: r.quotas, error: "" }),
      (err: unknown) => current && setLoaded({ of: workspace, error: errorText(err) }),
    );
    return () => {
      current = false;
    };
  }, [workspace, tick]);
  // What is shown belongs to the chosen workspace: an answer for another is never shown under it.
  const mine = loaded.of === workspace ? loaded : undefined;
  const error = listError || mine?.error || "";
  const body = auditBody(error, workspace, workspaces, mine?.quotas);
  return (
    <main>
      <h2>Quotas</h2>
      <div class="actions">
        <label>
          Workspace
          <select value={workspace} onChange={(e) => setWorkspace(e.currentTarget.value)}>
            {chainOptions(workspaces ?? [], workspace, false).map((o) => (
              <option key={o.value} value={o.value}>
                {o.label}
              </option>
            ))}
          </select>
        </label>{" "}
        <button type="button" onClick={() => setTick((t) => t + 1)}>
          Refresh
        </button>
      </div>
      {error !== "" && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {body === "refused" ? null : body === "none" ? (
        <p class="muted">
          No workspace to show: create one with <code>krane workspace create &lt;slug&gt;</code>.
        </p>
      ) : mine?.quotas === undefined ? (
        <p class="muted">Loading…</p>
      ) : (
        <Table
          label="Quotas"
          empty={
            <>
              ctrl named no quota for this workspace: it predates quotas (<code>krane quota get</code> says the same).
            </>
          }
          rows={quotaRows(mine.quotas)}
          rowKey={(r) => r.name}
          columns={[
            { key: "name", title: "Quota", value: (r) => r.name },
            { key: "used", title: "Used", value: (r) => r.used },
            { key: "limit", title: "Limit", value: (r) => r.limit },
            { key: "share", title: "Use", value: (r) => r.percent ?? -1, render: percentText },
            { key: "by", title: "Set by", value: (r) => r.setBy },
            {
              key: "state",
              title: "State",
              value: (r) => r.stateText,
              render: (r) => <Toned tone={quotaTone(r)}>{r.stateText}</Toned>,
            },
          ]}
        />
      )}
    </main>
  );
}
