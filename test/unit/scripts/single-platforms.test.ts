// The single-file CLI's platforms (scripts/build-single.mjs): which files `npm run build --
// --cli-platforms …` adds beside this machine's, and the names a release gives them.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { hostPlatform, parsePlatforms, PLATFORMS, singleFileName } from "../../../scripts/build-single.mjs";

describe("single-file CLI platforms", () => {
  it("builds only this machine's file unless asked; 'all' adds every other platform once", () => {
    assert.deepEqual(parsePlatforms(undefined), []);
    assert.deepEqual(parsePlatforms(""), []);
    const all = parsePlatforms("all");
    assert.ok(!all.includes(hostPlatform()), "this machine's file is built anyway");
    assert.deepEqual(new Set([...all, hostPlatform()]), new Set(Object.keys(PLATFORMS)));
    assert.deepEqual(
      parsePlatforms(" darwin-arm64 ,linux-arm64"),
      ["darwin-arm64", "linux-arm64"].filter((p) => p !== hostPlatform()),
    );
  });

  it("refuses a platform it cannot build, naming the flag and the choices", () => {
    assert.throws(
      () => parsePlatforms("linux-x64,plan9-mips"),
      /--cli-platforms: "plan9-mips" is not a platform; take "all" or some of linux-x64/,
    );
  });

  it("names each platform's file as a release does, Windows with .exe", () => {
    assert.equal(singleFileName("linux", "arm64"), "krane-linux-arm64");
    assert.equal(singleFileName("darwin", "x64"), "krane-darwin-x64");
    assert.equal(singleFileName("win32", "x64"), "krane-windows-x64.exe");
    for (const target of Object.values(PLATFORMS)) assert.match(target, /^bun-(linux|darwin|windows)-(x64|arm64)$/);
  });
});
