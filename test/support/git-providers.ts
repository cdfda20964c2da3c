// A local HTTP server implementing the commit-status API contracts of GitHub and GitLab, over real
// HTTP, for tests (no provider is reachable from here), and the deliveries those providers send:
//   GitHub: POST /repos/{owner}/{repo}/statuses/{sha} — `Authorization: Bearer <token>` (or
//     `token <token>`), JSON {state: error|failure|pending|success, target_url?, description?,
//     context?}; 401 "Bad credentials", 404 for an unknown repository, 422 for a bad state or sha;
//     201 with the status.
//   GitLab: POST /api/v4/projects/{id or url-encoded path}/statuses/{sha} — `PRIVATE-TOKEN`, JSON
//     {state: pending|running|success|failed|canceled|skipped, name?/context?, target_url?,
//     description?}; 401, 404, 400 for a bad state; 400 "Cannot transition status" when the
//     commit's status of that name already is that state (GitLab's state machine); 201.
import { createHmac, randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface PostedStatus {
  provider: "github" | "gitlab";
  repository: string;
  sha: string;
  state: string;
  targetUrl: string;
  description: string;
  context: string;
  at: number;
}

export interface FakeProviders {
  /** Base URLs: GitHub's API root and GitLab's /api/v4. */
  githubUrl: string;
  gitlabUrl: string;
  statuses: PostedStatus[];
  /** Makes the next `n` requests fail with 502 (a provider outage). */
  failNext(n: number): void;
  close(): Promise<void>;
}

export async function startFakeProviders(o: {
  githubToken: string;
  gitlabToken: string;
  /** Repositories known to each ("owner/name"; GitLab paths or ids). */
  githubRepos: string[];
  gitlabProjects: string[];
}): Promise<FakeProviders> {
  const statuses: PostedStatus[] = [];
  let failing = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const send = (status: number, body: unknown): void => {
        res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
      };
      if (failing > 0) {
        failing--;
        send(502, { message: "Bad Gateway" });
        return;
      }
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
      } catch {
        send(400, { message: "Problems parsing JSON" });
        return;
      }
      const url = new URL(req.url ?? "/", "http://x");
      const gh = /^\/github\/repos\/([^/]+)\/([^/]+)\/statuses\/([^/]+)$/.exec(url.pathname);
      const gl = /^\/gitlab\/api\/v4\/projects\/([^/]+)\/statuses\/([^/]+)$/.exec(url.pathname);
      if (req.method === "POST" && gh) {
        const auth = req.headers.authorization ?? "";
        if (auth !== `Bearer ${o.githubToken}` && auth !== `token ${o.githubToken}`) {
          send(401, { message: "Bad credentials" });
          return;
        }
        const repository = `${decodeURIComponent(gh[1] ?? "")}/${decodeURIComponent(gh[2] ?? "")}`;
        if (!o.githubRepos.includes(repository)) {
          send(404, { message: "Not Found" });
          return;
        }
        const sha = gh[3] ?? "";
        const state = body.state;
        if (
          typeof state !== "string" ||
          !["error", "failure", "pending", "success"].includes(state) ||
          !/^[0-9a-f]{40}$/.test(sha)
        ) {
          send(422, { message: "Validation Failed" });
          return;
        }
        const s: PostedStatus = {
          provider: "github",
          repository,
          sha,
          state,
          targetUrl: typeof body.target_url === "string" ? body.target_url : "",
          description: typeof body.description === "string" ? body.description : "",
          context: typeof body.context === "string" ? body.context : "default",
          at: Date.now(),
        };
        statuses.push(s);
        send(201, {
          id: statuses.length,
          state,
          target_url: s.targetUrl,
          description: s.description,
          context: s.context,
        });
        return;
      }
      if (req.method === "POST" && gl) {
        if (req.headers["private-token"] !== o.gitlabToken) {
          send(401, { message: "401 Unauthorized" });
          return;
        }
        const project = decodeURIComponent(gl[1] ?? "");
        if (!o.gitlabProjects.includes(project)) {
          send(404, { message: "404 Project Not Found" });
          return;
        }
        const sha = gl[2] ?? "";
        const state = body.state;
        if (
          typeof state !== "string" ||
          !["pending", "running", "success", "failed", "canceled", "skipped"].includes(state)
        ) {
          send(400, { message: "state does not have a valid value" });
          return;
        }
        const name =
          typeof body.name === "string" ? body.name : typeof body.context === "string" ? body.context : "default";
        const last = statuses.filter((s) => s.provider === "gitlab" && s.sha === sha && s.context === name).pop();
        if (last?.state === state) {
          send(400, { message: `Cannot transition status via :${state} from :${state}` });
          return;
        }
        const s: PostedStatus = {
          provider: "gitlab",
          repository: project,
          sha,
          state,
          targetUrl: typeof body.target_url === "string" ? body.target_url : "",
          description: typeof body.description === "string" ? body.description : "",
          context: name,
          at: Date.now(),
        };
        statuses.push(s);
        send(201, { id: statuses.length, sha, status: state, name, target_url: s.targetUrl });
        return;
      }
      send(404, { message: "Not Found" });
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    githubUrl: `http://127.0.0.1:${port}/github`,
    gitlabUrl: `http://127.0.0.1:${port}/gitlab/api/v4`,
    statuses,
    failNext: (n) => (failing = n),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** A GitHub pull_request delivery: body, and headers signed with the hook's secret. */
export function githubDelivery(
  secret: string,
  o: {
    action: "opened" | "reopened" | "synchronize" | "closed";
    number: number;
    sha: string;
    repository: string;
    fork?: boolean;
    updatedAt?: Date;
    deliveryId?: string;
  },
): { headers: Record<string, string>; body: string } {
  const head = o.fork ? `someone/${o.repository.split("/")[1] ?? "fork"}` : o.repository;
  const body = JSON.stringify({
    action: o.action,
    number: o.number,
    pull_request: {
      number: o.number,
      updated_at: (o.updatedAt ?? new Date()).toISOString(),
      merged: o.action === "closed",
      head: { sha: o.sha, ref: "feature/x", repo: { full_name: head, fork: o.fork ?? false } },
      base: { ref: "main", repo: { full_name: o.repository } },
    },
    repository: { full_name: o.repository },
    sender: { login: "octocat" },
  });
  return {
    body,
    headers: {
      "content-type": "application/json",
      "user-agent": "GitHub-Hookshot/test",
      "x-github-event": "pull_request",
      "x-github-delivery": o.deliveryId ?? randomUUID(),
      "x-hub-signature-256": `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`,
    },
  };
}

/** A GitLab merge request delivery, signed with a signing token (whsec_…) or carrying a secret token. */
export function gitlabDelivery(
  secret: string,
  o: {
    action: "open" | "update" | "close" | "merge";
    iid: number;
    sha: string;
    project: string;
    projectId: number;
    fork?: boolean;
    at?: Date;
    deliveryId?: string;
  },
): { headers: Record<string, string>; body: string } {
  const at = o.at ?? new Date();
  const body = JSON.stringify({
    object_kind: "merge_request",
    user: { username: "tanuki" },
    project: { id: o.projectId, path_with_namespace: o.project },
    object_attributes: {
      iid: o.iid,
      action: o.action,
      oldrev: o.action === "update" ? "0".repeat(40) : undefined,
      source_branch: "feature/x",
      source_project_id: o.fork ? o.projectId + 1 : o.projectId,
      target_project_id: o.projectId,
      updated_at: at
        .toISOString()
        .replace("T", " ")
        .replace(/\.\d+Z$/, " UTC"),
      last_commit: { id: o.sha },
    },
  });
  const id = o.deliveryId ?? randomUUID();
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "user-agent": "GitLab/test",
    "x-gitlab-event": "Merge Request Hook",
    "x-gitlab-event-uuid": id,
  };
  if (secret.startsWith("whsec_")) {
    const ts = String(Math.floor(at.getTime() / 1000));
    const key = Buffer.from(secret.slice(6), "base64");
    headers["webhook-id"] = id;
    headers["webhook-timestamp"] = ts;
    headers["webhook-signature"] = `v1,${createHmac("sha256", key).update(`${id}.${ts}.${body}`).digest("base64")}`;
  } else {
    headers["x-gitlab-token"] = secret;
  }
  return { headers, body };
}

/** POSTs a delivery to ctrl's webhook listener; its status and JSON answer. */
export async function deliver(
  url: string,
  d: { headers: Record<string, string>; body: string },
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url, { method: "POST", headers: d.headers, body: d.body });
  const text = await res.text();
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    body = { raw: text };
  }
  return { status: res.status, body };
}
