// Pagination of every List method on a real ctrl over HTTP/2, on SQLite and on PostgreSQL: a
// workspace's 1,779 deployments (a case once reported) come back complete across pages in a
// stable newest-first order (the store used to cut at 1,000 without a word), every list walks
// page by page to exactly its items, page sizes are coerced as documented, items added between
// pages neither repeat nor hide older ones, and a page token is refused (invalid_argument naming
// page_token) when it is altered, comes from another caller, or is used with other filters.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import {
  ApiTokenService,
  DeploymentService,
  EnvironmentService,
  ProjectService,
  RegionService,
  WorkspaceService,
} from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { createDeployment } from "../../../src/ctrl/domain/deployments.js";
import { createEnvironment } from "../../../src/ctrl/domain/environments.js";
import { createProject, createWorkspace } from "../../../src/ctrl/domain/tenancy.js";
import { createRegion, issueClusterToken } from "../../../src/ctrl/domain/clusters.js";
import { createApiToken } from "../../../src/ctrl/domain/tokens.js";
import { validateRollout } from "../../../src/ctrl/validate/api.js";
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from "../../../src/ctrl/api/page-token.js";
import { startPostgres, type TestPostgres } from "../../support/postgres.js";
import { expectCode, startTestCtrl, tempDir, type TestCtrl } from "./support.js";

interface Paged {
  nextPageToken: string;
}

/** Every page of a list, as the pages came. */
async function walk<R extends Paged, T>(
  fetch: (pageToken: string) => Promise<R>,
  items: (r: R) => T[],
): Promise<T[][]> {
  const pages: T[][] = [];
  let token = "";
  do {
    const r = await fetch(token);
    pages.push(items(r));
    token = r.nextPageToken;
    assert.ok(pages.length < 10_000, "pagination does not end");
  } while (token !== "");
  return pages;
}

function suite(name: string, database: () => Promise<string>): void {
  describe(`pagination on ${name}`, () => {
    let ctrl: TestCtrl;
    before(async () => {
      ctrl = await startTestCtrl(await database(), { rolloutSweepIntervalMs: 0 });
      const s = ctrl.store;
      await createRegion(s, "eu");
      await createWorkspace(s, { slug: "acme", name: "acme" });
      await createProject(s, { workspace: "acme", slug: "web", name: "web" });
      for (const env of ["prod", "stage"]) {
        await createEnvironment(s, {
          workspace: "acme",
          project: "web",
          slug: env,
          regions: [{ region: "eu", replicas: 0 }],
          sentinel: null,
          rollout: validateRollout(undefined),
        });
      }
      // The reported case, seeded through the domain (no rollout passes): 1,779 deployments.
      for (let i = 0; i < 1779; i++) {
        await createDeployment(s, {
          workspace: "acme",
          project: "web",
          environment: i % 3 === 0 ? "stage" : "prod",
          image: `registry.example.com/web:${i}`,
          command: [],
          args: [],
          port: 8080,
          env: [],
          cpuMillicores: 250,
          memoryMib: 256,
          healthCheck: null,
          buildId: "",
          replicas: null,
        });
      }
      for (let i = 0; i < 23; i++)
        await createWorkspace(s, { slug: `ws-${String(i).padStart(2, "0")}`, name: `ws ${i}` });
      for (let i = 0; i < 17; i++)
        await createProject(s, { workspace: "acme", slug: `p-${String(i).padStart(2, "0")}`, name: `p ${i}` });
      for (let i = 0; i < 11; i++) await createRegion(s, `r-${String(i).padStart(2, "0")}`);
      for (let i = 0; i < 9; i++) await issueClusterToken(s, "eu", `c-${i}`);
      for (let i = 0; i < 8; i++) await createApiToken(s, `t-${i}`);
    });
    after(async () => {
      await ctrl?.close();
    });

    it("ListDeployments: all 1,779 across pages of the default size, newest first, each once", async () => {
      const deployments = ctrl.client(DeploymentService, ctrl.adminToken);
      const pages = await walk(
        (pageToken) => deployments.listDeployments({ workspace: "acme", pageToken }),
        (r) => r.deployments,
      );
      assert.equal(pages.length, Math.ceil(1779 / DEFAULT_PAGE_SIZE));
      assert.ok(pages.slice(0, -1).every((p) => p.length === DEFAULT_PAGE_SIZE));
      const all = pages.flat();
      assert.equal(all.length, 1779);
      assert.equal(new Set(all.map((d) => d.id)).size, 1779, "no deployment twice");
      for (let i = 1; i < all.length; i++) {
        const [a, b] = [all[i - 1], all[i]];
        assert.ok(a && b);
        const order =
          a.createdAtUnixMs > b.createdAtUnixMs ||
          (a.createdAtUnixMs === b.createdAtUnixMs && a.revision >= b.revision);
        assert.ok(order, `newest first at ${i}`);
      }
      // Filters keep working across pages.
      const stage = (
        await walk(
          (pageToken) =>
            deployments.listDeployments({
              workspace: "acme",
              project: "web",
              environment: "stage",
              pageSize: 250,
              pageToken,
            }),
          (r) => r.deployments,
        )
      ).flat();
      assert.equal(stage.length, 593);
      assert.ok(stage.every((d) => Number(d.image.split(":")[1]) % 3 === 0));
    });

    it("every other List method walks page by page to exactly its items, in its order", async () => {
      const t = ctrl.adminToken;
      const slugs = (
        await walk(
          (pageToken) => ctrl.client(WorkspaceService, t).listWorkspaces({ pageSize: 5, pageToken }),
          (r) => r.workspaces,
        )
      )
        .flat()
        .map((w) => w.slug);
      assert.deepEqual(slugs, ["acme", ...Array.from({ length: 23 }, (_, i) => `ws-${String(i).padStart(2, "0")}`)]);
      const projects = (
        await walk(
          (pageToken) => ctrl.client(ProjectService, t).listProjects({ workspace: "acme", pageSize: 4, pageToken }),
          (r) => r.projects,
        )
      )
        .flat()
        .map((p) => p.slug);
      assert.deepEqual(projects, [...Array.from({ length: 17 }, (_, i) => `p-${String(i).padStart(2, "0")}`), "web"]);
      const envs = await walk(
        (pageToken) =>
          ctrl
            .client(EnvironmentService, t)
            .listEnvironments({ workspace: "acme", project: "web", pageSize: 1, pageToken }),
        (r) => r.environments,
      );
      assert.deepEqual(
        envs.map((p) => p.map((e) => e.slug)),
        [["prod"], ["stage"]],
      );
      assert.deepEqual(
        envs.flat()[0]?.regions.map((r) => r.region),
        ["eu"],
        "environments keep their regions",
      );
      const regions = (
        await walk(
          (pageToken) => ctrl.client(RegionService, t).listRegions({ pageSize: 3, pageToken }),
          (r) => r.regions,
        )
      )
        .flat()
        .map((r) => r.name);
      assert.deepEqual(regions, ["eu", ...Array.from({ length: 11 }, (_, i) => `r-${String(i).padStart(2, "0")}`)]);
      const clusters = (
        await walk(
          (pageToken) => ctrl.client(RegionService, t).listClusters({ pageSize: 2, pageToken }),
          (r) => r.clusters,
        )
      )
        .flat()
        .map((c) => `${c.region}/${c.name}`);
      assert.deepEqual(
        clusters,
        Array.from({ length: 9 }, (_, i) => `eu/c-${i}`),
      );
      const tokens = (
        await walk(
          (pageToken) => ctrl.client(ApiTokenService, t).listApiTokens({ pageSize: 3, pageToken }),
          (r) => r.apiTokens,
        )
      ).flat();
      assert.deepEqual(tokens.map((x) => x.name).sort(), ["admin", ...Array.from({ length: 8 }, (_, i) => `t-${i}`)]);
      const oldestFirst = [...tokens].sort((a, b) =>
        a.createdAtUnixMs !== b.createdAtUnixMs ? Number(a.createdAtUnixMs - b.createdAtUnixMs) : a.id < b.id ? -1 : 1,
      );
      assert.deepEqual(
        tokens.map((x) => x.id),
        oldestFirst.map((x) => x.id),
        "oldest first, then by id",
      );
    });

    it("page sizes: 0 is the default, above the maximum is the maximum, negative is refused; an exact last page ends with an empty token", async () => {
      const deployments = ctrl.client(DeploymentService, ctrl.adminToken);
      assert.equal((await deployments.listDeployments({ workspace: "acme" })).deployments.length, DEFAULT_PAGE_SIZE);
      const big = await deployments.listDeployments({ workspace: "acme", pageSize: 50_000 });
      assert.equal(big.deployments.length, MAX_PAGE_SIZE);
      assert.notEqual(big.nextPageToken, "");
      await expectCode(
        deployments.listDeployments({ workspace: "acme", pageSize: -1 }),
        Code.InvalidArgument,
        /^page_size: must not be negative$/,
      );
      const regions = ctrl.client(RegionService, ctrl.adminToken);
      const exact = await regions.listRegions({ pageSize: 12 });
      assert.equal(exact.regions.length, 12);
      assert.equal(exact.nextPageToken, "", "no token when nothing follows");
    });

    it("items created between pages neither repeat nor hide the ones that were there", async () => {
      const ws = ctrl.client(WorkspaceService, ctrl.adminToken);
      const first = await ws.listWorkspaces({ pageSize: 10 });
      assert.equal(first.workspaces.at(-1)?.slug, "ws-08");
      // One sorts before where the first page ended, one after.
      await ws.createWorkspace({ slug: "aaa" });
      await ws.createWorkspace({ slug: "ws-15a" });
      const seen: string[] = first.workspaces.map((w) => w.slug);
      let token = first.nextPageToken;
      while (token !== "") {
        const page = await ws.listWorkspaces({ pageSize: 10, pageToken: token });
        seen.push(...page.workspaces.map((w) => w.slug));
        token = page.nextPageToken;
      }
      assert.equal(new Set(seen).size, seen.length, "nothing twice");
      for (const s of ["acme", ...Array.from({ length: 23 }, (_, i) => `ws-${String(i).padStart(2, "0")}`)])
        assert.ok(seen.includes(s), `${s} listed`);
      assert.ok(!seen.includes("aaa"), "one sorting before the first page's end does not shift the later pages");
      assert.ok(seen.includes("ws-15a"), "one sorting after it is listed");
    });

    it("a page token is refused when altered, from another caller, or with other filters", async () => {
      const deployments = ctrl.client(DeploymentService, ctrl.adminToken);
      const { nextPageToken } = await deployments.listDeployments({
        workspace: "acme",
        project: "web",
        environment: "prod",
        pageSize: 5,
      });
      assert.notEqual(nextPageToken, "");
      const flipped = `${nextPageToken.slice(0, 20)}${nextPageToken[20] === "A" ? "B" : "A"}${nextPageToken.slice(21)}`;
      await expectCode(
        deployments.listDeployments({ workspace: "acme", project: "web", environment: "prod", pageToken: flipped }),
        Code.InvalidArgument,
        /^page_token: /,
      );
      await expectCode(
        deployments.listDeployments({
          workspace: "acme",
          project: "web",
          environment: "prod",
          pageToken: "not a token!",
        }),
        Code.InvalidArgument,
        /^page_token: is not a page token$/,
      );
      await expectCode(
        deployments.listDeployments({
          workspace: "acme",
          project: "web",
          environment: "stage",
          pageToken: nextPageToken,
        }),
        Code.InvalidArgument,
        /^page_token: belongs to another request/,
      );
      await expectCode(
        ctrl.client(RegionService, ctrl.adminToken).listClusters({ pageToken: nextPageToken }),
        Code.InvalidArgument,
        /^page_token: belongs to another request/,
      );
      const other = (await ctrl.client(ApiTokenService, ctrl.adminToken).createApiToken({ name: "other" })).token;
      await expectCode(
        ctrl
          .client(DeploymentService, other)
          .listDeployments({ workspace: "acme", project: "web", environment: "prod", pageToken: nextPageToken }),
        Code.InvalidArgument,
        /^page_token: is not a page token this caller was given/,
      );
      // The same caller with the same filters continues (a changed page size is honoured).
      const next = await deployments.listDeployments({
        workspace: "acme",
        project: "web",
        environment: "prod",
        pageToken: nextPageToken,
        pageSize: 7,
      });
      assert.equal(next.deployments.length, 7);
    });
  });
}

const dir = tempDir();
let postgres: TestPostgres | undefined;
after(async () => {
  await postgres?.stop();
  dir.remove();
});

suite("SQLite", async () => join(dir.path, "pages.db"));
suite("PostgreSQL", async () => {
  postgres ??= await startPostgres();
  return postgres.newDatabase();
});
