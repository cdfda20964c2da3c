// Shared by the source-build tests: why they cannot run on this machine (false: they can; BuildKit's
// runner needs Debian's unshare, runc, mmdebstrap and umoci, and runs as root in namespaces of its
// own), a source directory written from a map, and the CLI run against a test ctrl.
import { spawnSync } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnKrane } from "./cli.js";

const missing = ["unshare", "runc", "mmdebstrap", "umoci"].filter(
  (t) => spawnSync("sh", ["-c", `command -v ${t}`]).status !== 0,
);

export const buildsSkip: string | false =
  missing.length > 0
    ? `source builds need ${missing.join(", ")} (Debian: apt-get install runc mmdebstrap umoci)`
    : process.getuid?.() !== 0
      ? "buildkitd runs as root in namespaces of its own"
      : false;

/** Writes `files` (relative path → text) under `<root>/src/<name>`; the directory. */
export function writeSource(root: string, name: string, files: Record<string, string>): string {
  const src = join(root, "src", name);
  for (const [p, text] of Object.entries(files)) {
    mkdirSync(join(src, p, ".."), { recursive: true });
    writeFileSync(join(src, p), text);
  }
  return src;
}

/** Runs the built CLI (bin/krane.js) against `env`'s ctrl, without retries; its exit and output. */
export async function runKrane(
  env: { url: string; token: string; workspace: string },
  args: string[],
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawnKrane([...args, "--retry-for", "0"], {
    KRANE_CTRL_URL: env.url,
    KRANE_TOKEN: env.token,
    KRANE_WORKSPACE: env.workspace,
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const [status] = (await once(child, "exit")) as [number | null];
  return { status, stdout, stderr };
}
