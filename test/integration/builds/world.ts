// What a push-to-answer test and the build bench share (test/integration/builds/push-to-answer,
// bench/build.ts): on a local cluster with real nodes, the distribution registry in token mode on
// the nodes' link address (its realm on ctrl's API port there, so containerd fetches pull tokens
// from ctrl), the local git server, ctrl with its local build worker (BuildKit, krane's bases) and
// its webhook port, and the region's agent running krane's own sentinels. Then per project: a
// production environment with one sentinel replica, connected to a repository whose `main` it
// builds; signed GitHub pushes; what the environment's sentinel answers.
import assert from "node:assert/strict";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";
import { request } from "undici";
import type { Agent } from "../../../src/agent/agent.js";
import { ensureBases } from "../../../src/cluster/bases.js";
import { ensureBuildkit } from "../../../src/cluster/build.js";
import type { LocalCluster } from "../../../src/cluster/index.js";
import { SENTINEL_NAMESPACE, SENTINEL_PORT } from "../../../src/contracts/cluster.js";
import { LABEL_ENVIRONMENT_ID } from "../../../src/contracts/labels.js";
import { RegistryTokens, registryJwks, TOKEN_ISSUER } from "../../../src/ctrl/builds/registry-token.js";
import { githubSignature } from "../../../src/ctrl/previews/providers.js";
import {
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { BuildService, type Build } from "../../../src/gen/krane/ctrl/v1/build_pb.js";
import { RepositoryService } from "../../../src/gen/krane/ctrl/v1/repository_pb.js";
import { applySentinelRbac } from "../../../src/sentinel/rbac.js";
import { eventually } from "../../support/cluster.js";
import { startGitServer, type GitServer } from "../../support/git-server.js";
import { kubectlJson } from "../../support/real-nodes.js";
import { freePortOn, startTestRegistry, type TestRegistry } from "../../support/registry.js";
import { routingAgent } from "../agent/support.js";
import { randomKeyring, startTestCtrl, type TestCtrl } from "../ctrl/support.js";

const REGION = "local";
const SERVICE = "krane-build-registry";

/** A project connected to its repository: where to push and what its sentinel answers. */
export interface ConnectedProject {
  readonly project: string;
  /** The repository's name on the git server ("acme/shop.git"). */
  readonly repo: string;
  /** The webhook's URL on ctrl. */
  readonly hook: string;
  readonly environmentId: string;
}

export class BuildWorld {
  readonly gitToken = `git-token-${randomBytes(8).toString("hex")}`;
  readonly #secret = `hook-secret-${randomBytes(8).toString("hex")}`;
  #delivery = 0;
  registry!: TestRegistry;
  git!: GitServer;
  ctrl!: TestCtrl;
  agent!: Agent;
  /** ctrl's registry key: what the bench's floor pushes with. */
  tokens!: RegistryTokens;
  buildkit!: { buildkitd: string; buildctl: string };
  /** The bases' OCI layout. */
  bases = "";
  /** ctrl's BuildKit state: one directory (and daemon) per project. */
  stateDir = "";

  constructor(
    readonly cluster: LocalCluster,
    readonly dir: string,
    readonly workspace: string,
  ) {}

  /** `logger`: ctrl's (the tests' default: none). */
  async start(sentinelImage: string, log: (line: string) => void = console.log, logger?: Logger): Promise<void> {
    const plan = this.cluster.realNodes;
    if (!plan) throw new Error("the cluster has no real nodes");
    await applySentinelRbac(this.cluster.kubeConfig());
    this.buildkit = await ensureBuildkit(log);
    this.bases = await ensureBases(log);
    const pem = generateKeyPairSync("ec", { namedCurve: "prime256v1" })
      .privateKey.export({ type: "pkcs8", format: "pem" })
      .toString();
    const jwks = join(this.dir, "jwks.json");
    writeFileSync(jwks, JSON.stringify(await registryJwks([pem])));
    const port = await freePortOn(plan.hostIp);
    this.registry = await startTestRegistry({
      dir: this.dir,
      address: plan.hostIp,
      auth: "token",
      issuer: { realm: `http://${plan.hostIp}:${port}/registry/token`, service: SERVICE, issuer: TOKEN_ISSUER, jwks },
    });
    await this.cluster.trustRegistry(this.registry.host, this.registry.caPem);
    this.git = await startGitServer(this.dir, { "x-access-token": this.gitToken });
    this.tokens = await RegistryTokens.fromPem(pem, SERVICE);
    this.stateDir = join(this.dir, "buildkit");
    this.ctrl = await startTestCtrl(join(this.dir, "ctrl.db"), {
      listen: { host: plan.hostIp, port },
      keyring: randomKeyring(),
      ...(logger ? { logger } : {}),
      // Builds deploy their digest; nothing here names a tag to resolve.
      images: undefined,
      previews: { webhookListen: { host: "127.0.0.1", port: 0 } },
      builds: {
        registry: this.registry.host,
        tokens: this.tokens,
        ca: [this.registry.caPem],
        ...this.buildkit,
        basesLayout: this.bases,
        stateDir: this.stateDir,
        slots: 1,
        gitCaFile: this.git.caFile,
      },
    });
    const t = this.ctrl.adminToken;
    await this.ctrl.client(RegionService, t).createRegion({ name: REGION });
    await this.ctrl.client(WorkspaceService, t).createWorkspace({ slug: this.workspace });
    this.agent = await routingAgent(this.cluster, this.ctrl, REGION, {
      sentinelImage,
      sentinelObserveIntervalMs: 500,
    });
    await this.agent.start();
  }

  async stop(): Promise<void> {
    await this.agent?.stop();
    await this.ctrl?.close();
    await this.git?.close();
    await this.registry?.stop();
  }

  /**
   * `project` with a production environment (one sentinel replica); `repository`: `main` builds
   * it; `warmWindowSeconds`: how long the previous revision stays warm (unset: the default).
   */
  async project(
    project: string,
    o: { repository?: boolean; warmWindowSeconds?: number } = {},
  ): Promise<ConnectedProject> {
    const t = this.ctrl.adminToken;
    await this.ctrl.client(ProjectService, t).createProject({ workspace: this.workspace, slug: project });
    const { environment } = await this.ctrl.client(EnvironmentService, t).createEnvironment({
      workspace: this.workspace,
      project,
      slug: "production",
      regions: [{ region: REGION, replicas: 1 }],
      sentinel: { image: "", replicas: 1 },
      rollout: {
        maxSurge: "1",
        maxUnavailable: "0",
        ...(o.warmWindowSeconds === undefined ? {} : { warmWindowSeconds: o.warmWindowSeconds }),
      },
    });
    assert.ok(environment);
    const repo = `${this.workspace}/${project}.git`;
    if (o.repository === false) return { project, repo, hook: "", environmentId: environment.id };
    const { repository: connected } = await this.ctrl.client(RepositoryService, t).connectRepository({
      workspace: this.workspace,
      project,
      provider: "github",
      url: await this.git.createRepository(repo),
      token: this.gitToken,
      webhookSecret: this.#secret,
      branches: ["main=production"],
    });
    assert.ok(connected && this.ctrl.webhookUrl);
    return { project, repo, hook: `${this.ctrl.webhookUrl}${connected.webhookPath}`, environmentId: environment.id };
  }

  /** Delivers GitHub's signed push event of `commit` on main; the build it queued. */
  async push(p: ConnectedProject, commit: string): Promise<string> {
    const body = JSON.stringify({
      ref: "refs/heads/main",
      after: commit,
      deleted: false,
      repository: { full_name: p.repo.replace(/\.git$/, ""), pushed_at: Math.floor(Date.now() / 1000) },
      sender: { login: "ada" },
    });
    const res = await fetch(p.hook, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-github-event": "push",
        "x-github-delivery": `delivery-${++this.#delivery}`,
        "x-hub-signature-256": githubSignature(this.#secret, body),
      },
      body,
    });
    const json = (await res.json()) as Record<string, unknown>;
    assert.equal(res.status, 200, JSON.stringify(json));
    assert.equal(json.commit, commit);
    return String(json.build);
  }

  /** The build once it has finished (succeeded, failed or cancelled). */
  async built(id: string): Promise<Build> {
    return eventually(
      `build ${id} finished`,
      async () => {
        const b = (
          await this.ctrl
            .client(BuildService, this.ctrl.adminToken)
            .getBuild({ workspace: this.workspace, buildId: id })
        ).build;
        return b && b.state !== "queued" && b.state !== "running" ? b : undefined;
      },
      15 * 60_000,
    );
  }

  /** The address of the environment's sentinel Service (once the agent has made it). */
  async sentinelUrl(environmentId: string): Promise<string> {
    const ip = await eventually(
      "the environment's sentinel Service",
      async () =>
        (
          await kubectlJson<{ items: { spec: { clusterIP: string } }[] }>(this.cluster, [
            "services",
            "-n",
            SENTINEL_NAMESPACE,
            "-l",
            `${LABEL_ENVIRONMENT_ID}=${environmentId},app.kubernetes.io/component=sentinel`,
          ])
        ).items[0]?.spec.clusterIP,
      180_000,
    );
    return `http://${ip}:${SENTINEL_PORT}`;
  }
}

/** What the sentinel at `url` answers on / now: status and body, or undefined when it cannot be reached. */
export async function answer(url: string): Promise<{ status: number; body: string } | undefined> {
  const res = await request(`${url}/`, { headersTimeout: 10_000, bodyTimeout: 10_000 }).catch(() => undefined);
  if (!res) return undefined;
  return { status: res.statusCode, body: await res.body.text() };
}
