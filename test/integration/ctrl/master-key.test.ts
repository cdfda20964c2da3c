// The SQLite default master key, generated on first start: ctrl processes that start at the same
// moment on one database directory all come up, with the same key (none reads the file while
// another is still writing it).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { tempDir } from "./support.js";

const MODULE = fileURLToPath(new URL("../../../src/ctrl/secrets/master-key.ts", import.meta.url));

/** One process loading the keyring at `file` (generating it if absent); its key id, or its error. */
function loadInChild(file: string): Promise<{ code: number | null; out: string }> {
  const script = `
    const { loadKeyring } = await import(${JSON.stringify(MODULE)});
    try {
      const k = loadKeyring({ generateAt: ${JSON.stringify(file)} });
      process.stdout.write(k.currentId);
    } catch (err) {
      process.stdout.write("error: " + err.message);
      process.exitCode = 1;
    }`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, out }));
  });
}

describe("the generated master key", () => {
  it("is generated once when several processes start together, and every one reads it whole", async () => {
    const dir = tempDir("krane-master-key-");
    try {
      // Several rounds: the window between creating the file and writing it is short.
      for (let round = 0; round < 3; round++) {
        const file = join(dir.path, `master-key-${round}`);
        const results = await Promise.all(Array.from({ length: 8 }, () => loadInChild(file)));
        for (const r of results) assert.equal(r.code, 0, r.out);
        assert.equal(new Set(results.map((r) => r.out)).size, 1, "one key for all");
        assert.match(readFileSync(file, "utf8"), /^\S{40,}\n$/);
      }
    } finally {
      dir.remove();
    }
  });
});
