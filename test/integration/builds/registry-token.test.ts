// ctrl as the build registry's token issuer, against the real `registry` binary in token mode
// (auth.token: ctrl's realm on its API port, the JWKS of ctrl's key as `krane ctrl registry-jwks`
// prints it). A build of workspace acme pushes with a token ctrl signs for acme/shop alone; acme's
// pull Secret (what the agent gets from ClusterService) carries acme's pull identity for the
// build registry; with it a client following the registry's Bearer challenge pulls the built
// image — and is refused globex's image and any push; wrong or absent credentials get no token.
// The identity is ctrl's (`krane registry add` of the build registry is refused); removing it
// revokes it at once, and the workspace's next build makes a new one.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fromBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { Agent, fetch } from "undici";
import { packSourceDir } from "../../../src/builds/source-dir.js";
import { pushManifest } from "../../../src/builds/push.js";
import { ensureBases } from "../../../src/cluster/bases.js";
import { ensureBuildkit } from "../../../src/cluster/build.js";
import { PULL_SECRET_KEY, PULL_SECRET_NAME } from "../../../src/contracts/images.js";
import { RegistryTokens, registryJwks, TOKEN_ISSUER } from "../../../src/ctrl/builds/registry-token.js";
import { MANIFEST_TYPES, parseChallenge } from "../../../src/ctrl/images/registry-client.js";
import {
  EnvironmentService,
  ProjectService,
  RegionService,
  RegistryService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { BuildService, type Build } from "../../../src/gen/krane/ctrl/v1/build_pb.js";
import { ApplyDeploymentSchema, ClusterService } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { freePortOn, startTestRegistry, tinyImage, type TestRegistry } from "../../support/registry.js";
import { expectCode, randomKeyring, startTestCtrl, tempDir, type TestCtrl } from "../ctrl/support.js";
import { buildsSkip } from "../../support/build-tools.js";

const skip = buildsSkip;

const SERVICE = "krane-test-build-registry";
const PROJECT = "shop";

interface Credential {
  username: string;
  password: string;
}

describe("ctrl issues the build registry's tokens", { skip }, () => {
  const dir = tempDir("krane-registry-token-");
  let registry: TestRegistry;
  let ctrl: TestCtrl;
  let tokens: RegistryTokens;
  let dispatcher: Agent;

  before(async () => {
    const bk = await ensureBuildkit((l) => console.log(l));
    const bases = await ensureBases((l) => console.log(l));
    const pem = generateKeyPairSync("ec", { namedCurve: "prime256v1" })
      .privateKey.export({ type: "pkcs8", format: "pem" })
      .toString();
    const jwks = join(dir.path, "jwks.json");
    writeFileSync(jwks, JSON.stringify(await registryJwks([pem])));
    const port = await freePortOn("127.0.0.1");
    registry = await startTestRegistry({
      dir: dir.path,
      auth: "token",
      issuer: { realm: `http://127.0.0.1:${port}/registry/token`, service: SERVICE, issuer: TOKEN_ISSUER, jwks },
    });
    dispatcher = new Agent({ connect: { ca: registry.caPem } });
    tokens = await RegistryTokens.fromPem(pem, SERVICE);
    ctrl = await startTestCtrl(join(dir.path, "ctrl.db"), {
      listen: { host: "127.0.0.1", port },
      keyring: randomKeyring(),
      builds: {
        registry: registry.host,
        tokens,
        ca: [registry.caPem],
        buildkitd: bk.buildkitd,
        buildctl: bk.buildctl,
        basesLayout: bases,
        stateDir: join(dir.path, "buildkit"),
        slots: 1,
      },
    });
    const admin = ctrl.adminToken;
    await ctrl.client(RegionService, admin).createRegion({ name: "eu" });
    for (const ws of ["acme", "globex"]) {
      await ctrl.client(WorkspaceService, admin).createWorkspace({ slug: ws });
      await ctrl.client(ProjectService, admin).createProject({ workspace: ws, slug: PROJECT });
      await ctrl.client(EnvironmentService, admin).createEnvironment({
        workspace: ws,
        project: PROJECT,
        slug: "staging",
        regions: [{ region: "eu", replicas: 1 }],
      });
    }
  });
  after(async () => {
    await ctrl?.close();
    await registry?.stop();
    await dispatcher?.close();
    dir.remove();
  });

  const builds = () => ctrl.client(BuildService, ctrl.adminToken);

  async function build(workspace: string, files: Record<string, string>): Promise<Build> {
    const src = join(dir.path, "src", workspace);
    mkdirSync(src, { recursive: true });
    for (const [p, text] of Object.entries(files)) writeFileSync(join(src, p), text);
    const packed = await packSourceDir(src, { maxBytes: 1 << 24, maxArchiveBytes: 1 << 24 });
    await builds().uploadSource({
      workspace,
      project: PROJECT,
      digest: packed.digest,
      size: BigInt(packed.archive.length),
      offset: 0n,
      data: packed.archive,
    });
    const started = (
      await builds().startBuild({
        workspace,
        project: PROJECT,
        environment: "staging",
        sourceDigest: packed.digest,
        deploy: true,
      })
    ).build!;
    for (let i = 0; i < 3000; i++) {
      const b = (await builds().getBuild({ workspace, buildId: started.id })).build!;
      if (b.state === "succeeded") return b;
      if (b.state === "failed" || b.state === "cancelled")
        throw new Error(
          `build ${b.id} ${b.state}: ${b.error} ${(await builds().getBuild({ workspace, buildId: b.id })).log.join("\n")}`,
        );
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`build ${started.id} did not end`);
  }

  /** The build registry's credential in the workspace's pull Secret, as an agent of eu gets it. */
  async function pullCredential(workspace: string): Promise<Credential> {
    const ws = await ctrl.store.db
      .selectFrom("workspaces")
      .select("id")
      .where("slug", "=", workspace)
      .executeTakeFirstOrThrow();
    const rows = await ctrl.store.db
      .selectFrom("desired_objects")
      .select("payload")
      .where("kind", "=", "deployment")
      .where("region", "=", "eu")
      .execute();
    const payload = rows.map((r) => fromBinary(ApplyDeploymentSchema, r.payload)).find((p) => p.workspaceId === ws.id);
    assert.ok(payload, `a revision of ${workspace} is desired in eu`);
    assert.equal(payload.pullSecret?.secretName, PULL_SECRET_NAME, "the payload names the pull Secret");
    const eu = ctrl.client(ClusterService, await ctrl.agentToken("eu"));
    const got = await eu.getSecretValues({
      region: "eu",
      owner: { case: "deploymentPullSecret", value: payload.deploymentId },
    });
    assert.equal(got.values[0]?.key, PULL_SECRET_KEY);
    const auths = (JSON.parse(Buffer.from(got.values[0]!.value).toString()) as { auths: Record<string, Credential> })
      .auths;
    const c = auths[registry.host];
    assert.ok(c, `the pull Secret holds ${registry.host}: ${Object.keys(auths).join(", ")}`);
    assert.equal(c.username, `krane-pull-${ws.id}`);
    return { username: c.username, password: c.password };
  }

  /**
   * A request as a registry client makes it: unauthenticated first, then (on the Bearer
   * challenge) a token from the realm with `credential` as Basic, then the request again.
   */
  async function asClient(
    credential: Credential | undefined,
    method: string,
    path: string,
  ): Promise<{ realmStatus: number; status: number; body: string }> {
    const url = `https://${registry.host}${path}`;
    const headers = { accept: MANIFEST_TYPES.join(", ") };
    const first = await fetch(url, { method, headers, dispatcher });
    await first.text();
    assert.equal(first.status, 401);
    const challenge = parseChallenge(first.headers.get("www-authenticate"));
    assert.equal(challenge?.scheme, "bearer");
    const realm = new URL(challenge.params.realm ?? "");
    realm.searchParams.set("service", challenge.params.service ?? "");
    if (challenge.params.scope) realm.searchParams.set("scope", challenge.params.scope);
    const t = await fetch(realm, {
      headers: credential
        ? { authorization: `Basic ${Buffer.from(`${credential.username}:${credential.password}`).toString("base64")}` }
        : {},
    });
    const answer = (await t.json()) as { token?: string };
    if (t.status !== 200) {
      assert.equal(answer.token, undefined, "a refusal carries no token");
      return { realmStatus: t.status, status: 0, body: "" };
    }
    const second = await fetch(url, {
      method,
      headers: { ...headers, authorization: `Bearer ${answer.token}` },
      dispatcher,
    });
    return { realmStatus: t.status, status: second.status, body: await second.text() };
  }

  let acme: Credential;
  let acmeBuild: Build;

  it("a build of acme pushes with ctrl's token; acme's pull Secret carries its pull identity, which pulls the image", async () => {
    acmeBuild = await build("acme", { "index.html": "<p>acme</p>\n" });
    assert.equal(acmeBuild.image, `${registry.host}/acme/${PROJECT}:${acmeBuild.id}`);
    acme = await pullCredential("acme");
    const manifest = await asClient(acme, "GET", `/v2/acme/${PROJECT}/manifests/${acmeBuild.imageDigest}`);
    assert.equal(manifest.status, 200, manifest.body);
    const config = (JSON.parse(manifest.body) as { config?: { digest: string } }).config;
    assert.ok(config, "a single-platform manifest");
    const blob = await asClient(acme, "GET", `/v2/acme/${PROJECT}/blobs/${config.digest}`);
    assert.equal(blob.status, 200);
  });

  it("acme's credential cannot pull globex's image nor push; wrong or absent credentials get no token", async () => {
    assert.ok(acme, "the first test ran");
    // globex's image, pushed with a token of ctrl's key for globex/shop (as ctrl's worker does).
    const tiny = tinyImage("globex");
    const globexDigest = await pushManifest(
      {
        base: `https://${registry.host}`,
        authorization: tokens.bearerFor("krane-ctrl", ["pull", "push"]),
        dispatcher,
      },
      `globex/${PROJECT}`,
      "v1",
      tiny.blobs,
      tiny.manifest,
      tiny.mediaType,
    );
    const path = `/v2/globex/${PROJECT}/manifests/${globexDigest}`;
    const refused = await asClient(acme, "GET", path);
    assert.equal(refused.realmStatus, 200, "a pull identity gets a token, granting nothing of globex");
    assert.ok([401, 403].includes(refused.status), `the registry refuses: ${refused.status} ${refused.body}`);

    // Its own repository, but push: refused too.
    const push = await asClient(acme, "POST", `/v2/acme/${PROJECT}/blobs/uploads/`);
    assert.ok([401, 403].includes(push.status), `a push with a pull identity: ${push.status} ${push.body}`);

    // No credentials, a wrong password, acme's password under another workspace's name: 401, no token.
    assert.equal((await asClient(undefined, "GET", path)).realmStatus, 401);
    assert.equal((await asClient({ ...acme, password: `${acme.password}x` }, "GET", path)).realmStatus, 401);
    const globexId = (
      await ctrl.store.db.selectFrom("workspaces").select("id").where("slug", "=", "globex").executeTakeFirstOrThrow()
    ).id;
    const forged = await asClient({ username: `krane-pull-${globexId}`, password: acme.password }, "GET", path);
    assert.equal(forged.realmStatus, 401);

    // The refusal is about the grant: the image is there.
    const direct = await fetch(`https://${registry.host}${path}`, {
      headers: {
        accept: MANIFEST_TYPES.join(", "),
        authorization: `Bearer ${(await tokens.sign("test", [{ type: "repository", name: `globex/${PROJECT}`, actions: ["pull"] }])).token}`,
      },
      dispatcher,
    });
    assert.equal(direct.status, 200, await direct.text());
  });

  it("the pull identity is ctrl's: not added by hand; removing it revokes it, and the next build makes a new one", async () => {
    assert.ok(acme, "the first test ran");
    const registries = ctrl.client(RegistryService, ctrl.adminToken);
    await expectCode(
      registries.addRegistry({ workspace: "acme", host: registry.host, username: "me", password: "mine" }),
      Code.InvalidArgument,
      /host: .*ctrl's build registry/,
    );
    const listed = await registries.listRegistries({ workspace: "acme" });
    assert.deepEqual(
      listed.registries.map((r) => [r.host, r.username]),
      [[registry.host, acme.username]],
    );
    await registries.removeRegistry({ workspace: "acme", host: registry.host });
    const path = `/v2/acme/${PROJECT}/manifests/${acmeBuild.imageDigest}`;
    assert.equal((await asClient(acme, "GET", path)).realmStatus, 401, "the removed credential gets no token");
    await build("acme", { "index.html": "<p>acme again</p>\n" });
    const rotated = await pullCredential("acme");
    assert.equal(rotated.username, acme.username);
    assert.notEqual(rotated.password, acme.password);
    assert.equal((await asClient(rotated, "GET", path)).status, 200);
  });
});
