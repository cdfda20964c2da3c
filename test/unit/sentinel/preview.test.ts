// Blue-green preview routing in the sentinel: requests carrying the preview header reach only the
// policy's preview revision (even at weight 0); other requests never do; a policy without a
// preview routes the header like any request; policies with and without the field round-trip.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Balancer } from "../../../src/sentinel/balancer.js";
import type { RoutingTable } from "../../../src/sentinel/table.js";
import { formatRoutingPolicy, parseRoutingPolicy } from "../../../src/contracts/routing.js";

function table(preview: string | undefined): RoutingTable {
  const rev = (id: string, weight: number, n: number, k: number): RoutingTable["revisions"][number] => ({
    deploymentId: id,
    weight,
    endpoints: Array.from({ length: n }, (_, i) => {
      const address = `10.0.${k}.${i + 1}`;
      return {
        key: `${address}:8080`,
        address,
        port: 8080,
        dialHost: address,
        deploymentId: id,
        pod: `${id}-${i}`,
        protocol: "http1" as const,
      };
    }),
  });
  return {
    version: 2,
    mode: "weighted",
    revisions: [rev("blue", 100, 3, 0), rev("green", 0, 3, 1)],
    ...(preview !== undefined ? { preview } : {}),
  };
}

test("the preview header reaches only the preview revision; other requests never do", () => {
  const b = new Balancer();
  b.setTable(table("green"));
  for (let i = 0; i < 500; i++) {
    assert.equal(b.pick(undefined, true)?.endpoint.deploymentId, "green");
    assert.equal(b.pick(undefined, false)?.endpoint.deploymentId, "blue");
  }
  // Retries exclude tried instances but stay on the preview revision.
  const first = b.pick(undefined, true);
  assert.ok(first);
  const second = b.pick(new Set([first.key]), true);
  assert.equal(second?.endpoint.deploymentId, "green");
  assert.notEqual(second?.key, first.key);
});

test("without a preview in the policy the header changes nothing", () => {
  const b = new Balancer();
  b.setTable(table(undefined));
  for (let i = 0; i < 200; i++) assert.equal(b.pick(undefined, true)?.endpoint.deploymentId, "blue");
});

test("a preview revision with no instance answers no instance rather than the live one", () => {
  const b = new Balancer();
  b.setTable(table("gone"));
  assert.equal(b.pick(undefined, true), undefined);
});

test("the policy's preview field round-trips and older documents still parse", () => {
  const p = {
    version: 3,
    environmentId: "env_1",
    mode: "weighted" as const,
    revisions: [{ deploymentId: "a", weight: 100 }],
    preview: "b",
  };
  assert.deepEqual(parseRoutingPolicy(formatRoutingPolicy(p)), p);
  const old = {
    version: 3,
    environmentId: "env_1",
    mode: "weighted" as const,
    revisions: [{ deploymentId: "a", weight: 100 }],
  };
  assert.deepEqual(parseRoutingPolicy(formatRoutingPolicy(old)), old);
  assert.throws(() => parseRoutingPolicy(JSON.stringify({ ...old, preview: 7 })), /preview/);
});
