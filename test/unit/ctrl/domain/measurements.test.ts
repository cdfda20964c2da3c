// ctrl's pure side of measurements: validating an agent's report (every bound names its field)
// and adding stored rows up into a RevisionSample (property: the sample is the sum of its rows,
// requests is the sum of the classes, the window spans the rows).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import fc from "fast-check";
import { LATENCY_BUCKETS_MS } from "../../../../src/contracts/analysis.js";
import { addUp } from "../../../../src/ctrl/domain/measurements.js";
import { DomainError } from "../../../../src/ctrl/errors.js";
import { validateMeasurementReport } from "../../../../src/ctrl/validate/measurements.js";
import {
  ReportMeasurementsRequestSchema,
  RevisionMeasurementSchema,
  type ReportMeasurementsRequest,
} from "../../../../src/gen/krane/ctrl/v1/cluster_pb.js";

const SLOTS = LATENCY_BUCKETS_MS.length + 1;
const NOW = 1_800_000_000_000;
const HOUR = 3_600_000;

function req(
  over: { from?: number; to?: number; revisions?: MessageInitShape<typeof RevisionMeasurementSchema>[] } = {},
): ReportMeasurementsRequest {
  return create(ReportMeasurementsRequestSchema, {
    region: "eu",
    fromUnixMs: BigInt(over.from ?? NOW - 10_000),
    toUnixMs: BigInt(over.to ?? NOW),
    revisions: over.revisions ?? [
      {
        environmentId: "env_a",
        deploymentId: "dep_a",
        responses2xx: 5n,
        responses5xx: 1n,
        latencyBuckets: new Array<bigint>(SLOTS).fill(1n),
      },
    ],
  });
}

function field(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return err instanceof DomainError ? err.field : `not a DomainError: ${String(err)}`;
  }
  return undefined;
}

describe("validateMeasurementReport", () => {
  it("accepts a good report, filling absent latency buckets with zeros", () => {
    const r = validateMeasurementReport(req(), NOW, HOUR);
    assert.equal(r.fromMs, NOW - 10_000);
    assert.deepEqual(r.entries[0]?.classes, [5, 0, 0, 1]);
    const none = validateMeasurementReport(
      req({ revisions: [{ environmentId: "env_a", deploymentId: "dep_a", responses2xx: 1n }] }),
      NOW,
      HOUR,
    );
    assert.deepEqual(none.entries[0]?.latency, new Array<number>(SLOTS).fill(0));
  });

  it("names the field at fault", () => {
    const v = (r: ReturnType<typeof req>): string | undefined => field(() => validateMeasurementReport(r, NOW, HOUR));
    assert.equal(v(req({ from: 0 })), "from_unix_ms");
    assert.equal(v(req({ from: NOW, to: NOW })), "to_unix_ms");
    assert.equal(v(req({ from: NOW - 2 * HOUR, to: NOW })), "from_unix_ms");
    assert.equal(v(req({ from: NOW + 100_000, to: NOW + 110_000 })), "to_unix_ms");
    assert.equal(v(req({ from: NOW - 3 * HOUR, to: NOW - 2 * HOUR })), "to_unix_ms");
    assert.equal(
      v(req({ revisions: [{ environmentId: "dep_a", deploymentId: "dep_a" }] })),
      "revisions[0].environment_id",
    );
    assert.equal(v(req({ revisions: [{ environmentId: "env_a", deploymentId: "" }] })), "revisions[0].deployment_id");
    assert.equal(
      v(req({ revisions: [{ environmentId: "env_a", deploymentId: "dep_a", latencyBuckets: [1n] }] })),
      "revisions[0].latency_buckets",
    );
    assert.equal(
      v(req({ revisions: [{ environmentId: "env_a", deploymentId: "dep_a", responses4xx: 10n ** 13n }] })),
      "revisions[0].responses_4xx",
    );
    assert.equal(
      v(
        req({
          revisions: [
            {
              environmentId: "env_a",
              deploymentId: "dep_a",
              latencyBuckets: [...new Array<bigint>(SLOTS - 1).fill(0n), 10n ** 13n],
            },
          ],
        }),
      ),
      `revisions[0].latency_buckets[${SLOTS - 1}]`,
    );
    assert.equal(
      v(
        req({
          revisions: [
            { environmentId: "env_a", deploymentId: "dep_a" },
            { environmentId: "env_b", deploymentId: "dep_a" },
            { environmentId: "env_a", deploymentId: "dep_a" },
          ],
        }),
      ),
      "revisions[2].deployment_id",
    );
    assert.equal(
      v(
        req({
          revisions: Array.from({ length: 2_001 }, (_, i) => ({ environmentId: "env_a", deploymentId: `dep_${i}` })),
        }),
      ),
      "revisions",
    );
  });
});

describe("addUp", () => {
  it("is the sum of its rows (property)", () => {
    const row = fc.record({
      region: fc.constantFrom("eu", "us", "ap"),
      from_ms: fc.integer({ min: 0, max: 1_000 }),
      len: fc.integer({ min: 1, max: 100 }),
      c: fc.array(fc.nat(10_000), { minLength: 4, maxLength: 4 }),
      lat: fc.array(fc.nat(10_000), { minLength: SLOTS, maxLength: SLOTS }),
    });
    fc.assert(
      fc.property(fc.array(row, { minLength: 1, maxLength: 20 }), (rows) => {
        const s = addUp(
          "dep_a",
          rows.map((r) => ({
            region: r.region,
            from_ms: r.from_ms,
            to_ms: r.from_ms + r.len,
            r2xx: r.c[0] ?? 0,
            r3xx: r.c[1] ?? 0,
            r4xx: r.c[2] ?? 0,
            r5xx: r.c[3] ?? 0,
            latency: JSON.stringify(r.lat),
          })),
        );
        assert.ok(s);
        const sum = (i: number): number => rows.reduce((a, r) => a + (r.c[i] ?? 0), 0);
        assert.deepEqual(s.byClass, { "2xx": sum(0), "3xx": sum(1), "4xx": sum(2), "5xx": sum(3) });
        assert.equal(s.requests, sum(0) + sum(1) + sum(2) + sum(3));
        assert.deepEqual(
          s.latencyBuckets,
          Array.from({ length: SLOTS }, (_, i) => rows.reduce((a, r) => a + (r.lat[i] ?? 0), 0)),
        );
        assert.deepEqual(s.regions, [...new Set(rows.map((r) => r.region))].sort());
        assert.equal(s.fromMs, Math.min(...rows.map((r) => r.from_ms)));
        assert.equal(s.toMs, Math.max(...rows.map((r) => r.from_ms + r.len)));
      }),
    );
    assert.equal(addUp("dep_a", []), undefined);
  });
});
