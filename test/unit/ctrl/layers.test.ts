// Unit tests of ctrl's registries: the migrations (one per file, registered under the file's
// name, in order, the names release be3ed9d recorded unchanged — Kysely finds applied migrations
// by name) and the kinds (every ClusterService method is some kind's or the heartbeat, exactly
// once; a kind missing or registered twice stops ctrl from starting), and the poke format
// carrying any registered kind's name.
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { ClusterService } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { clusterServiceImpl, type ClusterServiceDeps } from "../../../src/ctrl/cluster-service/handlers.js";
import { decodePoke, encodePoke } from "../../../src/ctrl/db/notify.js";
import { MIGRATIONS } from "../../../src/ctrl/db/migrations/index.js";
import { deploymentKind } from "../../../src/ctrl/kinds/deployment.js";
import { KIND_NAMES, KINDS } from "../../../src/ctrl/kinds/registry.js";
import { sentinelKind } from "../../../src/ctrl/kinds/sentinel.js";
import { KIND_PAYLOADS } from "../../../src/ctrl/payloads/registry.js";

const MIGRATIONS_DIR = join(import.meta.dirname, "..", "..", "..", "src", "ctrl", "db", "migrations");

describe("migrations", () => {
  it("are one file each, registered under the file's name, numbered in order", () => {
    const files = readdirSync(MIGRATIONS_DIR)
      .filter((f) => /^\d{4}_/.test(f))
      .map((f) => f.replace(/\.ts$/, ""))
      .sort();
    assert.deepEqual(Object.keys(MIGRATIONS), files);
    // NNNN_name, or NNNN_a_name, NNNN_b_name … for several under one number (numbers are handed
    // out to work done in parallel, so one may be missing until that work lands).
    let last = 0;
    let lastLetter = "";
    for (const name of files) {
      const m = /^(\d{4})_(?:([a-z])_)?[a-z0-9_]+$/.exec(name);
      assert.ok(m, `${name}: NNNN_name or NNNN_x_name`);
      const n = Number(m[1]);
      const letter = m[2] ?? "";
      assert.ok(
        n > last || (n === last && letter > lastLetter && lastLetter !== ""),
        `${name} after number ${last}${lastLetter}`,
      );
      [last, lastLetter] = [n, letter];
    }
    assert.deepEqual(
      files.slice(0, 6).map((f) => f.slice(0, 4)),
      ["0001", "0002", "0003", "0004", "0005", "0006"],
    );
    // Every other file there is the registry or the migration type.
    assert.deepEqual(
      readdirSync(MIGRATIONS_DIR)
        .filter((f) => !/^\d{4}_/.test(f))
        .sort(),
      ["index.ts", "migration.ts"],
    );
  });

  it("keep the names release be3ed9d recorded", () => {
    assert.deepEqual(Object.keys(MIGRATIONS).slice(0, 5), [
      "0001_initial",
      "0002_rollouts",
      "0003_commit_sequencer",
      "0004_api_tokens",
      "0005_revoked_tokens",
    ]);
  });
});

describe("kinds", () => {
  const deps = {
    store: undefined,
    hub: undefined,
    metrics: undefined,
    streamsStop: new AbortController().signal,
  } as unknown as ClusterServiceDeps;

  it("are registered once each, under distinct names and id prefixes", () => {
    assert.deepEqual(KIND_NAMES, ["deployment", "sentinel", "release", "job", "gateway", "build"]);
    assert.equal(new Set(KINDS.map((k) => k.idPrefix)).size, KINDS.length);
  });

  it("are keyed by their own names in both registries", () => {
    for (const [name, p] of Object.entries(KIND_PAYLOADS)) assert.equal(p.name, name);
    assert.deepEqual(
      KINDS.map((k) => k.name),
      KIND_NAMES,
    );
  });

  it("stream the payloads the layers below them write: the same names, in order, with the same Apply and Delete", () => {
    assert.deepEqual(
      KINDS.map((k) => [k.name, k.wire.apply.typeName, k.wire.delete.typeName]),
      Object.values(KIND_PAYLOADS).map((p) => [p.name, p.apply.typeName, p.delete.typeName]),
    );
  });

  it("implement every ClusterService method exactly once, with the heartbeat", () => {
    const impl = clusterServiceImpl(deps) as unknown as Record<string, unknown>;
    for (const m of ClusterService.methods) assert.equal(typeof impl[m.localName], "function", m.localName);
    assert.deepEqual(Object.keys(impl).sort(), ClusterService.methods.map((m) => m.localName).sort());
  });

  it("stop ctrl from starting when a method has no kind or two", () => {
    assert.throws(
      () => clusterServiceImpl({ ...deps, kinds: [deploymentKind as never] }),
      /without a kind: watchSentinels/,
    );
    assert.throws(() => clusterServiceImpl({ ...deps, kinds: [...KINDS, sentinelKind as never] }), /implemented twice/);
  });

  it("travel in pokes by name, whatever the kind", () => {
    for (const kind of [...KIND_NAMES, "gateway-route", "release"]) {
      assert.deepEqual(decodePoke(encodePoke({ kind, region: "eu-west", version: 7 })), {
        kind,
        region: "eu-west",
        version: 7,
      });
    }
    for (const bad of ["Deployment/eu/1", "/eu/1", "deployment//1", "deploy ment/eu/1", "a/b/c/d"])
      assert.equal(decodePoke(bad), null, bad);
  });
});
