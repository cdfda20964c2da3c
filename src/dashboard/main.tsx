// krane's web dashboard: sign-in, the overview (environments, clusters) and an environment's
// page (revisions, instances, sentinels, rollout, actions). Every figure comes from the public
// API through api.ts; the page re-reads what it shows 2 s after each read ends.
import { render } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import type { GetEnvironmentStatusResponse, Cluster, Deployment } from "../gen/krane/ctrl/v1/api_pb.js";
import type { RolloutStatus } from "../gen/krane/ctrl/v1/rollout_pb.js";
import { InstanceStatus } from "../gen/krane/ctrl/v1/cluster_pb.js";
import { api, errorText, isInstallationOnly, isSignedOut, signIn, signOut, whoAmI, type Me } from "./api.js";
import { Table, type Column } from "./table.js";

const REFRESH_MS = 2_000;

function ago(ms: bigint | number): string {
  const t = Number(ms);
  if (t === 0) return "never";
  const s = Math.max(0, Math.round((Date.now() - t) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  if (s < 86400) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86400)}d ago`;
}

/** Hash routes: #/ and #/env/<workspace>/<project>/<environment>. */
function useRoute(): string[] {
  const parse = () =>
    location.hash
      .replace(/^#\/?/, "")
      .split("/")
      .filter((p) => p !== "")
      .map(decodeURIComponent);
  const [route, setRoute] = useState(parse());
  useEffect(() => {
    const on = () => setRoute(parse());
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  return route;
}

/** Calls `load` now and again REFRESH_MS after each call ends. */
function usePoll<T>(
  load: () => Promise<T>,
  deps: unknown[],
): { data: T | undefined; error: string; reload: () => void } {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState("");
  const [tick, setTick] = useState(0);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    // The next refresh is timed from the end of this one: a load slower than the interval must
    // not be abandoned by the next, or a big page would never show anything.
    const next = () => {
      if (live) timer = setTimeout(() => setTick((x) => x + 1), REFRESH_MS);
    };
    load()
      .then(
        (d) => {
          if (!live) return;
          setData(d);
          setError("");
        },
        (err: unknown) => {
          if (!live) return;
          if (isSignedOut(err)) location.reload();
          setError(errorText(err));
        },
      )
      .finally(next);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [...deps, tick]);
  return { data, error, reload };
}

function SignIn(props: { onDone: () => void }) {
  const [error, setError] = useState("");
  const input = useRef<HTMLInputElement>(null);
  return (
    <main class="signin">
      <h1>Sign in to krane</h1>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          const field = input.current;
          if (!field) return;
          const token = field.value;
          // The token leaves the page's memory as soon as it is sent.
          field.value = "";
          const refused = await signIn(token);
          if (refused) setError(refused);
          else props.onDone();
        }}
      >
        <label>
          API token
          <input ref={input} name="token" type="password" autocomplete="off" required aria-describedby="signin-error" />
        </label>
        <p id="signin-error" class="error" role="alert">
          {error}
        </p>
        <button class="primary" type="submit">
          Sign in
        </button>
      </form>
      <p class="muted">
        Use an API token (KRANE_TOKEN); a workspace token shows only its workspace. The browser keeps only a session
        cookie.
      </p>
    </main>
  );
}

interface EnvRow {
  workspace: string;
  project: string;
  environment: string;
  regions: string;
  replicas: number;
  updated: bigint;
}

/** Every item of a paged List call (ctrl answers at most a page at a time), following next_page_token. */
async function all<T>(page: (pageToken: string) => Promise<{ items: T[]; next: string }>): Promise<T[]> {
  const out: T[] = [];
  let token = "";
  do {
    const { items, next } = await page(token);
    out.push(...items);
    token = next;
  } while (token !== "");
  return out;
}

function Overview() {
  const { data, error } = usePoll(async () => {
    const workspaces = await all(async (pageToken) => {
      const r = await api.workspaces.listWorkspaces({ pageToken, pageSize: 1000 });
      return { items: r.workspaces, next: r.nextPageToken };
    });
    const envs: EnvRow[] = [];
    for (const w of workspaces) {
      const projects = await all(async (pageToken) => {
        const r = await api.projects.listProjects({ workspace: w.slug, pageToken, pageSize: 1000 });
        return { items: r.projects, next: r.nextPageToken };
      });
      for (const p of projects) {
        const environments = await all(async (pageToken) => {
          const r = await api.environments.listEnvironments({
            workspace: w.slug,
            project: p.slug,
            pageToken,
            pageSize: 1000,
          });
          return { items: r.environments, next: r.nextPageToken };
        });
        for (const e of environments)
          envs.push({
            workspace: w.slug,
            project: p.slug,
            environment: e.slug,
            regions: e.regions.map((r) => `${r.region}=${r.replicas}`).join(", "),
            replicas: e.regions.reduce((n, r) => n + r.replicas, 0),
            updated: e.updatedAtUnixMs,
          });
      }
    }
    // Clusters are the installation's: a workspace token's session is refused them (permission_denied).
    const clusters = await all(async (pageToken) => {
      const r = await api.regions.listClusters({ pageToken, pageSize: 1000 });
      return { items: r.clusters, next: r.nextPageToken };
    }).catch((err: unknown) => {
      if (isInstallationOnly(err)) return [];
      throw err;
    });
    return { envs, clusters };
  }, []);
  const envColumns: Column<EnvRow>[] = [
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
    { key: "regions", title: "Regions (replicas)", value: (r) => r.regions },
    { key: "replicas", title: "Replicas", value: (r) => r.replicas },
    { key: "updated", title: "Updated", value: (r) => Number(r.updated), render: (r) => ago(r.updated) },
  ];
  const clusterColumns: Column<Cluster>[] = [
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
  return (
    <main>
      <h2>Environments</h2>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {data ? (
        <Table
          label="Environments"
          rows={data.envs}
          columns={envColumns}
          rowKey={(r) => `${r.workspace}/${r.project}/${r.environment}`}
          filter
        />
      ) : (
        <p class="muted">Loading…</p>
      )}
      <h2>Clusters</h2>
      {data && <Table label="Clusters" rows={data.clusters} columns={clusterColumns} rowKey={(c) => c.id} />}
    </main>
  );
}

interface InstanceRow {
  key: string;
  region: string;
  name: string;
  revision: bigint;
  state: string;
  node: string;
}

function statusName(s: InstanceStatus): string {
  return (InstanceStatus[s] ?? "UNKNOWN").replace(/^INSTANCE_STATUS_/, "").toLowerCase();
}

/** What a rollback to `to` changes, field by field. */
function rollbackDiff(from: Deployment | undefined, to: Deployment): { field: string; now: string; then: string }[] {
  const f = (d: Deployment | undefined) => ({
    image: d?.image ?? "",
    command: [...(d?.command ?? []), ...(d?.args ?? [])].join(" "),
    port: String(d?.port ?? ""),
    env: (d?.env ?? [])
      .map((e) => e.name)
      .sort()
      .join(", "),
  });
  const a = f(from);
  const b = f(to);
  return (Object.keys(a) as (keyof typeof a)[]).map((k) => ({ field: k, now: a[k], then: b[k] }));
}

function Confirm(props: { title: string; children: preact.ComponentChildren; onYes: () => void; onNo: () => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    ref.current?.showModal();
  }, []);
  return (
    <dialog ref={ref} aria-label={props.title} onCancel={props.onNo}>
      <h2>{props.title}</h2>
      {props.children}
      <div class="actions">
        <button class="primary" type="button" onClick={props.onYes}>
          Confirm
        </button>
        <button type="button" onClick={props.onNo}>
          Cancel
        </button>
      </div>
    </dialog>
  );
}

function EnvironmentPage(props: { workspace: string; project: string; environment: string }) {
  const ref = { workspace: props.workspace, project: props.project, environment: props.environment };
  const { data, error, reload } = usePoll(async () => {
    const status: GetEnvironmentStatusResponse = await api.status.getEnvironmentStatus(ref);
    const rollout: RolloutStatus | undefined = (await api.rollout.getRolloutStatus(ref)).status;
    return { status, rollout };
  }, [props.workspace, props.project, props.environment]);
  const [pending, setPending] = useState<{
    title: string;
    body: preact.ComponentChildren;
    run: () => Promise<unknown>;
  }>();
  const [actionError, setActionError] = useState("");
  const [imageError, setImageError] = useState("");
  const [image, setImage] = useState("");

  const act = (title: string, run: () => Promise<unknown>, body: preact.ComponentChildren = null) =>
    setPending({ title, body, run });
  const deployments = [...(data?.status.deployments ?? [])].sort(
    (a, b) => Number(b.deployment?.revision ?? 0) - Number(a.deployment?.revision ?? 0),
  );
  // The revision the rollout moves to (a rollback's target is an older one), else the newest.
  const targetId = data?.rollout?.regions[0]?.targetDeploymentId;
  const current = deployments.find((d) => d.deployment?.id === targetId)?.deployment ?? deployments[0]?.deployment;
  const instances: InstanceRow[] = deployments.flatMap((d) =>
    d.regions.flatMap((r) =>
      r.instances.map((i) => ({
        key: `${r.region}/${i.k8sName}`,
        region: r.region,
        name: i.k8sName,
        revision: d.deployment?.revision ?? 0n,
        state: statusName(i.status),
        node: i.nodeName,
      })),
    ),
  );
  const progressive = data?.rollout?.progressive;
  const revisionOf = (id: string) => deployments.find((d) => d.deployment?.id === id)?.deployment?.revision;

  return (
    <main>
      <p>
        <a href="#/">Overview</a> / {props.workspace} / {props.project}/{props.environment}
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <h2>Actions</h2>
      <form
        class="actions"
        onSubmit={(e) => {
          e.preventDefault();
          setImageError("");
          const img = image.trim();
          act(`Deploy ${img}`, () =>
            api.deployments.createDeployment({ ...ref, image: img, port: current?.port ?? 0 }).catch((err: unknown) => {
              setImageError(errorText(err));
              throw err;
            }),
          );
        }}
      >
        <label>
          Image
          <input
            name="image"
            value={image}
            onInput={(e) => setImage(e.currentTarget.value)}
            placeholder={current?.image ?? "registry/app:tag"}
            aria-describedby="image-error"
            required
          />
        </label>
        <button class="primary" type="submit">
          Deploy
        </button>
        <span id="image-error" class="error" role="alert">
          {imageError}
        </span>
      </form>
      <div class="actions">
        <button type="button" onClick={() => act("Pause the rollout", () => api.rollout.pause(ref))}>
          Pause
        </button>
        <button type="button" onClick={() => act("Resume the rollout", () => api.rollout.resume(ref))}>
          Resume
        </button>
        <button type="button" onClick={() => act("Promote", () => api.rollout.promote(ref))}>
          Promote
        </button>
        <button type="button" onClick={() => act("Abort", () => api.rollout.abort(ref))}>
          Abort
        </button>
        <button type="button" onClick={() => act("Restart every instance", () => api.rollout.restart(ref))}>
          Restart
        </button>
      </div>
      {actionError && (
        <p class="error" role="alert">
          {actionError}
        </p>
      )}
      {pending && (
        <Confirm
          title={pending.title}
          onNo={() => setPending(undefined)}
          onYes={() => {
            const p = pending;
            setPending(undefined);
            setActionError("");
            p.run().then(reload, (err: unknown) => setActionError(errorText(err)));
          }}
        >
          {pending.body}
        </Confirm>
      )}
      <h2>Rollout</h2>
      {data?.rollout && (
        <div>
          <p>
            Strategy <strong>{data.rollout.strategy || "RollingUpdate"}</strong>
            {progressive && (
              <>
                {" "}
                · phase <strong>{progressive.phase}</strong>
                {progressive.aborted && <span class="bad"> · aborted</span>}
                {progressive.reason && <span class="muted"> · {progressive.reason}</span>}
              </>
            )}
          </p>
          <Table
            label="Rollout per region"
            rows={data.rollout.regions}
            rowKey={(r) => r.region}
            columns={[
              { key: "region", title: "Region", value: (r) => r.region },
              {
                key: "phase",
                title: "State",
                value: (r) => (r.complete ? "complete" : r.paused ? "paused" : "progressing"),
              },
              { key: "desired", title: "Desired", value: (r) => r.replicas },
              { key: "updated", title: "Updated", value: (r) => r.updatedReplicas },
              { key: "ready", title: "Ready", value: (r) => r.readyReplicas },
              { key: "available", title: "Available", value: (r) => r.availableReplicas },
            ]}
          />
          {progressive && progressive.weights.length > 0 && (
            <Table
              label="Traffic weights"
              rows={progressive.weights}
              rowKey={(r) => r.region}
              columns={[
                { key: "region", title: "Region", value: (r) => r.region },
                {
                  key: "weights",
                  title: "Weights",
                  value: (r) => r.weights.map((w) => `r${revisionOf(w.deploymentId) ?? "?"} ${w.weight}%`).join(", "),
                },
              ]}
            />
          )}
        </div>
      )}
      <h2>Revisions</h2>
      <Table
        label="Revisions"
        rows={deployments}
        rowKey={(d) => d.deployment?.id ?? ""}
        columns={[
          { key: "rev", title: "Revision", value: (d) => Number(d.deployment?.revision ?? 0) },
          { key: "image", title: "Image", value: (d) => d.deployment?.image ?? "" },
          {
            key: "when",
            title: "Created",
            value: (d) => Number(d.deployment?.createdAtUnixMs ?? 0),
            render: (d) => ago(d.deployment?.createdAtUnixMs ?? 0),
          },
          {
            key: "running",
            title: "Running / desired",
            value: (d) => d.regions.map((r) => `${r.region} ${r.runningInstances}/${r.desiredReplicas}`).join(", "),
          },
          {
            key: "rollback",
            title: "",
            value: () => "",
            render: (d) =>
              d.deployment && d.deployment.id !== current?.id ? (
                <button
                  type="button"
                  aria-label={`Roll back to revision ${d.deployment.revision}`}
                  onClick={() => {
                    const to = d.deployment as Deployment;
                    act(
                      `Roll back to revision ${to.revision}`,
                      () => api.rollout.undo({ ...ref, toRevision: to.revision }),
                      <table class="diff" aria-label="What the rollback changes">
                        <thead>
                          <tr>
                            <th scope="col">Field</th>
                            <th scope="col">Now (r{String(current?.revision ?? "")})</th>
                            <th scope="col">After (r{String(to.revision)})</th>
                          </tr>
                        </thead>
                        <tbody>
                          {rollbackDiff(current, to).map((row) => (
                            <tr key={row.field}>
                              <td>{row.field}</td>
                              <td>{row.now}</td>
                              <td class={row.now !== row.then ? "changed" : ""}>{row.then}</td>
                            </tr>
                          ))}
                        </tbody>
                      </table>,
                    );
                  }}
                >
                  Roll back
                </button>
              ) : (
                <span class="muted">target</span>
              ),
          },
        ]}
      />
      <h2>Instances</h2>
      <Table
        label="Instances"
        rows={instances}
        rowKey={(r) => r.key}
        filter
        columns={[
          { key: "region", title: "Region", value: (r) => r.region },
          { key: "name", title: "Instance", value: (r) => r.name },
          { key: "rev", title: "Revision", value: (r) => Number(r.revision) },
          {
            key: "state",
            title: "State",
            value: (r) => r.state,
            render: (r) => <span class={r.state === "running" ? "ok" : "warn"}>{r.state}</span>,
          },
          { key: "node", title: "Node", value: (r) => r.node },
        ]}
      />
      <h2>Sentinels</h2>
      <Table
        label="Sentinels"
        rows={data?.status.sentinels ?? []}
        rowKey={(s) => s.sentinelId + s.region}
        columns={[
          { key: "region", title: "Region", value: (s) => s.region },
          { key: "avail", title: "Available / desired", value: (s) => `${s.availableReplicas}/${s.desiredReplicas}` },
          {
            key: "routing",
            title: "Routing version served / desired",
            value: (s) => `${s.servedRoutingVersion}/${s.routingVersion}`,
            render: (s) => (
              <span class={s.servedRoutingVersion === s.routingVersion ? "ok" : "warn"}>
                {String(s.servedRoutingVersion)}/{String(s.routingVersion)}
              </span>
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
    </main>
  );
}

function App() {
  const [me, setMe] = useState<Me | undefined | null>(null);
  const route = useRoute();
  const check = () => void whoAmI().then(setMe);
  useEffect(check, []);
  if (me === null) return <p class="muted">Loading…</p>;
  if (me === undefined) return <SignIn onDone={check} />;
  const [page, ws, project, env] = route;
  return (
    <>
      <header>
        <h1>krane</h1>
        <nav aria-label="Main">
          <a href="#/">Overview</a>
        </nav>
        <span class="muted">
          signed in as {me.name}
          {me.workspace ? ` (workspace ${me.workspace.slug})` : ""}
        </span>
        <button
          type="button"
          onClick={() =>
            void signOut().then(() => {
              location.hash = "#/";
              setMe(undefined);
            })
          }
        >
          Sign out
        </button>
      </header>
      {page === "env" && ws && project && env ? (
        <EnvironmentPage workspace={ws} project={project} environment={env} />
      ) : (
        <Overview />
      )}
    </>
  );
}

const root = document.getElementById("app");
if (root) render(<App />, root);
