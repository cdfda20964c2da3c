// Why a test of source builds cannot run on this machine (false: it can): BuildKit's runner needs
// Debian's unshare, runc, mmdebstrap and umoci, and runs as root in namespaces of its own.
import { spawnSync } from "node:child_process";

const missing = ["unshare", "runc", "mmdebstrap", "umoci"].filter(
  (t) => spawnSync("sh", ["-c", `command -v ${t}`]).status !== 0,
);

export const buildsSkip: string | false =
  missing.length > 0
    ? `source builds need ${missing.join(", ")} (Debian: apt-get install runc mmdebstrap umoci)`
    : process.getuid?.() !== 0
      ? "buildkitd runs as root in namespaces of its own"
      : false;
