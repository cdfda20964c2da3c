// krane.yaml in a built source: the part for the build's environment, or the file refused with
// its line and column (nothing of it applied), or nothing when the source has none.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ProjectFileRefused, sourceProjectFile } from "../../../src/builds/project-file.js";
import type { TarEntry } from "../../../src/builds/tar.js";

const file = (path: string, text: string): TarEntry => ({
  path,
  type: "file",
  data: new TextEncoder().encode(text),
});
const app = file("server.js", "// app\n");

function refused(entries: TarEntry[]): string {
  try {
    sourceProjectFile(entries, "shop", "production");
  } catch (err) {
    assert.ok(err instanceof ProjectFileRefused, String(err));
    return err.message;
  }
  assert.fail("the file was not refused");
}

test("no krane.yaml at the root: the build deploys as without one", () => {
  assert.deepEqual(sourceProjectFile([app, file("sub/krane.yaml", "project: x\n")], "shop", "production"), {
    kind: "none",
  });
});

test("the build's environment's part is what applies", () => {
  const got = sourceProjectFile(
    [
      app,
      file(
        "krane.yaml",
        "project: shop\nenvironments:\n  production:\n    config:\n      GREETING: hello\n  staging:\n    config:\n      GREETING: hi\n",
      ),
    ],
    "shop",
    "production",
  );
  assert.equal(got.kind, "environment");
  assert.deepEqual(got.kind === "environment" ? got.desired.config : undefined, { GREETING: "hello" });
});

test("a file naming other environments only applies nothing here, and says so", () => {
  const got = sourceProjectFile(
    [file("krane.yaml", "project: shop\nenvironments:\n  staging: {}\n")],
    "shop",
    "production",
  );
  assert.equal(got.kind, "other");
  assert.match(got.kind === "other" ? got.note : "", /names no environment "production" \(staging\)/);
});

test("a bad file is refused with its line and column", () => {
  assert.match(
    refused([file("krane.yaml", "project: shop\nenvironments:\n  production:\n    confg:\n      A: b\n")]),
    /^krane\.yaml:4:5: environments\.production\.confg: unknown key "confg" \(did you mean "config"\?\)$/,
  );
  assert.match(
    refused([file("krane.yaml", "project: other\nenvironments: {}\n")]),
    /^krane\.yaml:1:10: project: is "other", but this build is of project "shop"$/,
  );
  assert.match(refused([{ path: "krane.yaml", type: "symlink", target: "/etc/passwd" }]), /is a symbolic link/);
  assert.match(refused([file("krane.yaml", "x".repeat(1024 * 1024 + 1))]), /over the limit/);
});
