// The pure parts of the BuildKit runner: how buildkitd is started (its own network, mount and PID
// namespaces, dying with its parent) and how FROM names reach the bases' OCI layout by digest.
import assert from "node:assert/strict";
import { it } from "node:test";
import { baseContextOpts, buildkitdCommand, failedStep } from "../../../src/builds/buildkit.js";
import { GO_BASE, NODE_BASE, RUN_BASE } from "../../../src/contracts/builds.js";

it("buildkitd starts in new network, mount and PID namespaces, killed with its parent", () => {
  const [cmd, args] = buildkitdCommand({ buildkitd: "/bk/buildkitd", stateDir: "/state/p1", runc: "/usr/sbin/runc" });
  assert.equal(cmd, "unshare");
  const sep = args.indexOf("--");
  const ns = args.slice(0, sep);
  for (const flag of ["--net", "--mount", "--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL"])
    assert.ok(ns.includes(flag), flag);
  assert.deepEqual(args.slice(sep + 1, sep + 6), [
    "/bk/buildkitd",
    "--addr",
    "unix:///state/p1/buildkitd.sock",
    "--root",
    "/state/p1/root",
  ]);
  assert.equal(args[args.indexOf("--oci-worker-binary") + 1], "/usr/sbin/runc");
});

const index = JSON.stringify({
  schemaVersion: 2,
  manifests: [
    { digest: "sha256:aaa", annotations: { "org.opencontainers.image.ref.name": "node-20" } },
    { digest: "sha256:bbb", annotations: { "org.opencontainers.image.ref.name": "go-1.26" } },
  ],
});

it("each base the plan names becomes a named context pinned to its digest in the layout", () => {
  assert.deepEqual(baseContextOpts(index, [NODE_BASE, GO_BASE]), [
    "--opt",
    "context:krane.local/base/node:20=oci-layout://bases@sha256:aaa",
    "--opt",
    "context:krane.local/base/go:1.26=oci-layout://bases@sha256:bbb",
  ]);
  assert.throws(() => baseContextOpts(index, [RUN_BASE]), /no run-12 \(krane\.local\/base\/run:12\)/);
});

it("a failed build's step and its last lines come from BuildKit's closing block", () => {
  // The end of `buildctl build --progress plain` of a failed RUN step (BuildKit v0.34.2).
  const lines = [
    "#9 [4/5] RUN cat /etc/hostname; id",
    "#9 0.129 /bin/sh: 1: cat: not found",
    "#9 0.130 /bin/sh: 1: id: not found",
    '#9 ERROR: process "/bin/sh -c cat /etc/hostname; id" did not complete successfully: exit code: 127',
    "------",
    " > [4/5] RUN cat /etc/hostname; id:",
    "0.129 /bin/sh: 1: cat: not found",
    "0.130 /bin/sh: 1: id: not found",
    "------",
    "Dockerfile:5",
    "--------------------",
    "   5 | >>> RUN cat /etc/hostname; id",
    "--------------------",
    'error: failed to solve: process "/bin/sh -c cat /etc/hostname; id" did not complete successfully: exit code: 127',
  ];
  assert.deepEqual(failedStep(lines), {
    step: "[4/5] RUN cat /etc/hostname; id",
    output: ["/bin/sh: 1: cat: not found", "/bin/sh: 1: id: not found"],
  });
  assert.equal(
    failedStep(["#1 DONE", "error: failed to solve: failed to read dockerfile: open Dockerfile: no such file"]),
    undefined,
  );
});
