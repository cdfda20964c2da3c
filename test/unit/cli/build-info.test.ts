// The build stamp (what `npm run build` writes and every process reports) and how `krane
// version` shows it, including what a run from source (tsx, no stamp) says.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { buildInfo, buildLabel, parseBuildStamp } from "../../../src/build-info.js";
import { buildKind, versionLine, versionText } from "../../../src/cli/version.js";

const pkg = JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { version: string };

describe("build info", () => {
  it("parses a stamp and names a missing or empty field", () => {
    assert.deepEqual(parseBuildStamp('{"version":"1.2.3","commit":"abc","date":"2026-01-01T00:00:00Z"}'), {
      version: "1.2.3",
      commit: "abc",
      date: "2026-01-01T00:00:00Z",
    });
    assert.throws(() => parseBuildStamp('{"version":"1.2.3","date":"x"}'), /"commit" must be a non-empty string/);
    assert.throws(
      () => parseBuildStamp('{"version":"","commit":"a","date":"x"}'),
      /"version" must be a non-empty string/,
    );
    assert.throws(() => parseBuildStamp("[]"), /"version"/);
    assert.throws(() => parseBuildStamp("null"), /expected a JSON object/);
  });

  it("run from source, reports package.json's version and commit dev", () => {
    const info = buildInfo();
    assert.equal(info.version, pkg.version);
    assert.equal(info.commit, "dev");
    assert.equal(info.date, "");
    assert.equal(buildLabel(info), `${pkg.version}+dev`);
  });

  it("labels and prints a stamped build", () => {
    const info = { version: "1.2.3", commit: "3f2a1bc9d0e4", date: "2026-11-23T15:00:00Z" };
    assert.equal(buildLabel(info), "1.2.3+3f2a1bc9d0e4");
    assert.equal(versionLine(info), "krane 1.2.3 (commit 3f2a1bc9d0e4, built 2026-11-23T15:00:00Z)");
    const text = versionText(info, "1.2.0+abc");
    assert.match(text, /^krane\s+1\.2\.3$/m);
    assert.match(text, /^commit\s+3f2a1bc9d0e4$/m);
    assert.match(text, /^built\s+2026-11-23T15:00:00Z$/m);
    assert.match(text, /^ctrl\s+1\.2\.0\+abc$/m);
    assert.match(versionText(info, ""), /^ctrl\s+unknown/m);
    assert.doesNotMatch(versionText(info), /ctrl/);
  });

  it("names its build: the single file, or Node.js", () => {
    const info = { version: "1.2.3", commit: "3f2a1bc9d0e4", date: "2026-11-23T15:00:00Z" };
    assert.match(
      versionText(info),
      new RegExp(`^build\\s+node \\(Node\\.js ${process.version.replace(/\./g, "\\.")}: `, "m"),
    );
    assert.deepEqual(buildKind(info).build, "node");
    const single = { ...info, singleFile: true };
    assert.equal(versionLine(single), "krane 1.2.3 (commit 3f2a1bc9d0e4, built 2026-11-23T15:00:00Z, single file)");
    assert.match(
      versionText(single),
      new RegExp(
        `^build\\s+single file for ${process.platform}-${process.arch} \\(node \\S+ built in; user commands only\\)$`,
        "m",
      ),
    );
    assert.equal(buildKind(single).build, "single-file");
  });

  it("says when it runs from source", () => {
    const dev = { version: "1.2.3", commit: "dev", date: "" };
    assert.equal(versionLine(dev), "krane 1.2.3 (commit dev, running from source)");
    assert.match(versionText(dev), /^built\s+- \(running from source, not built\)$/m);
  });
});
