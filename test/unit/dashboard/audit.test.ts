// The audit page's choices, by the session's scope: which chains it offers (a workspace session
// never the installation's), which one a bare #/audit opens, the filter each asks ctrl for, and
// what the page shows while it waits, when refused, and when there is nothing to show.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { AuditEventSchema } from "../../../src/gen/krane/ctrl/v1/audit_pb.js";
import {
  auditBody,
  auditFilter,
  chainOptions,
  firstChain,
  hasDetails,
} from "../../../src/dashboard/views/audit-model.js";

describe("audit chains", () => {
  it("offers an installation session every workspace and the installation's chain", () => {
    assert.deepEqual(chainOptions(["acme", "globex"], "acme", true), [
      { value: "acme", label: "workspace acme" },
      { value: "globex", label: "workspace globex" },
      { value: "*", label: "the installation" },
    ]);
  });

  it("never offers a workspace session the installation's chain, even when the address names it", () => {
    assert.deepEqual(chainOptions(["globex"], "globex", false), [{ value: "globex", label: "workspace globex" }]);
    assert.deepEqual(chainOptions(["globex"], "*", false), [{ value: "globex", label: "workspace globex" }]);
  });

  it("offers the address's chain when it is not listed (ctrl's refusal is then what the page shows)", () => {
    assert.deepEqual(
      chainOptions(["globex"], "acme", false).map((o) => o.value),
      ["globex", "acme"],
    );
    // Not before the list is read, and not twice.
    assert.deepEqual(
      chainOptions([], "", true).map((o) => o.value),
      ["*"],
    );
    assert.deepEqual(
      chainOptions(["acme"], "acme", false).map((o) => o.value),
      ["acme"],
    );
  });

  it("opens the first workspace listed; with none, the installation's only for an installation session", () => {
    assert.equal(firstChain(["acme", "globex"], true), "acme");
    assert.equal(firstChain([], true), "*");
    assert.equal(firstChain([], false), "");
  });

  it("asks ctrl for a workspace's chain by its slug and for the installation's by a flag", () => {
    assert.deepEqual(auditFilter("acme", false), { workspace: "acme", refusedOnly: false });
    assert.deepEqual(auditFilter("*", true), { installation: true, refusedOnly: true });
  });

  it("shows a refusal instead of anything else, then 'nothing to show', then the wait", () => {
    const ev = [create(AuditEventSchema, { seq: 1n })];
    assert.equal(auditBody("permission denied", "acme", ["acme"], ev), "refused");
    assert.equal(auditBody("permission denied", "acme", undefined, undefined), "refused");
    // The list is read and names no chain to show.
    assert.equal(auditBody("", "", [], undefined), "none");
    // The list is not read yet.
    assert.equal(auditBody("", "", undefined, undefined), "loading");
    assert.equal(auditBody("", "acme", ["acme"], undefined), "loading");
    assert.equal(auditBody("", "acme", ["acme"], ev), "events");
    assert.equal(auditBody("", "acme", ["acme"], []), "events");
  });

  it("offers an event's details when it changed something or ctrl said why", () => {
    assert.equal(hasDetails(create(AuditEventSchema, {})), false);
    assert.equal(hasDetails(create(AuditEventSchema, { message: "slug: taken" })), true);
    assert.equal(hasDetails(create(AuditEventSchema, { changes: [{ field: "image", op: "set" }] })), true);
  });
});
