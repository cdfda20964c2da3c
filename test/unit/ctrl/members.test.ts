// The pure rules of workspace roles: their order, parsing a role or email address from a request,
// and who may grant what (src/contracts/roles.ts, src/ctrl/domain/members.ts).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { allows, higherRole, roleOfRank, withArticle } from "../../../src/contracts/roles.js";
import { Role } from "../../../src/ctrl/auth/policy.js";
import { checkGrant, normalEmail, parseRole } from "../../../src/ctrl/domain/members.js";
import { DomainError } from "../../../src/ctrl/errors.js";

function code(fn: () => void): string | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    assert.ok(err instanceof DomainError, String(err));
    return err.code;
  }
}

describe("roles", () => {
  it("rank as the proto's Role enum ranks them", () => {
    assert.equal(roleOfRank(Role.VIEWER), "viewer");
    assert.equal(roleOfRank(Role.DEVELOPER), "developer");
    assert.equal(roleOfRank(Role.ADMIN), "admin");
    assert.equal(roleOfRank(Role.OWNER), "owner");
    assert.equal(roleOfRank(Role.UNSPECIFIED), undefined);
    assert.ok(allows("owner", "viewer") && allows("admin", "admin") && !allows("developer", "admin"));
    assert.equal(higherRole("viewer", "admin"), "admin");
    assert.equal(higherRole(null, "developer"), "developer");
    assert.equal(withArticle("admin"), "an admin");
    assert.equal(withArticle("viewer"), "a viewer");
  });

  it("parses a role by name, else invalid_argument naming the field", () => {
    assert.equal(parseRole("role", " Admin "), "admin");
    assert.throws(() => parseRole("role", "superuser"), /role.*not a role/);
    assert.equal(
      code(() => parseRole("role", "")),
      "invalid_argument",
    );
  });

  it("keys members by a lower-case email address", () => {
    assert.equal(normalEmail("email", " Ana@Example.COM "), "ana@example.com");
    assert.equal(
      code(() => normalEmail("email", "ana")),
      "invalid_argument",
    );
    assert.equal(
      code(() => normalEmail("email", `${"a".repeat(250)}@example.com`)),
      "invalid_argument",
    );
  });

  it("grants nothing above the granter's role, and owners only by owners", () => {
    assert.equal(
      code(() => checkGrant("installation", "owner")),
      undefined,
    );
    assert.equal(
      code(() => checkGrant("owner", "owner", "admin")),
      undefined,
    );
    assert.equal(
      code(() => checkGrant("admin", "developer", "viewer")),
      undefined,
    );
    assert.equal(
      code(() => checkGrant("admin", "owner")),
      "permission_denied",
    );
    assert.equal(
      code(() => checkGrant("admin", "viewer", "owner")),
      "permission_denied",
    );
    assert.equal(
      code(() => checkGrant("admin", null, "owner")),
      "permission_denied",
    );
    assert.equal(
      code(() => checkGrant("developer", "admin")),
      "permission_denied",
    );
  });
});
