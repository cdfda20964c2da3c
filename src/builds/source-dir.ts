// A directory as a source archive (`krane deploy --source DIR`, `krane build DIR`): the files git
// would consider part of the project — `.gitignore` files (every directory's, as git reads them),
// `.git/info/exclude` and the user's global excludes — less what `.kraneignore` at the root
// excludes (gitignore syntax; it applies to tracked files too), packed with ./tar.ts so that equal
// contents give equal bytes. Git itself reads the ignore files (`git ls-files`), in the directory's
// own repository or, outside one, through a throwaway empty one: the rules are exactly git's.
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { lstat, mkdtemp, readFile, readlink, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { packTar, type TarEntry } from "./tar.js";

const run = promisify(execFile);

export const KRANEIGNORE = ".kraneignore";

export interface PackedSource {
  /** The gzipped tar. */
  readonly archive: Buffer;
  /** "sha256:<hex>" of the archive: its identity in ctrl. */
  readonly digest: string;
  /** How many files, links and directories it holds, and their bytes before compression. */
  readonly files: number;
  readonly bytes: number;
}

/** A directory that cannot be packed; the message names it and says why. */
export class SourceDirError extends Error {}

async function git(args: string[], cwd: string): Promise<string> {
  try {
    return (await run("git", args, { cwd, maxBuffer: 256 * 1024 * 1024 })).stdout;
  } catch (err) {
    const e = err as { code?: string | number; stderr?: string; message: string };
    if (e.code === "ENOENT")
      throw new SourceDirError(
        "packing a source directory needs git (it reads .gitignore files), which is not on PATH",
      );
    throw new SourceDirError(`git ${args[0] ?? ""} failed in ${cwd}: ${(e.stderr || e.message).trim()}`);
  }
}

const nul = (out: string): string[] => out.split("\0").filter((p) => p !== "");

/** The paths (relative, "/"-separated) git would take from `dir`, less `.kraneignore`'s. */
export async function sourcePaths(dir: string): Promise<string[]> {
  let gitDir: string[] = [];
  let scratch: string | undefined;
  const inside = await run("git", ["rev-parse", "--is-inside-work-tree"], { cwd: dir }).then(
    (r) => r.stdout.trim() === "true",
    () => false,
  );
  if (!inside) {
    scratch = await mkdtemp(join(tmpdir(), "krane-source-"));
    await git(["init", "--quiet", scratch], dir);
    gitDir = [`--git-dir=${join(scratch, ".git")}`, `--work-tree=${dir}`];
  }
  try {
    const ignoreFile = join(dir, KRANEIGNORE);
    const hasIgnore = await lstat(ignoreFile).then(
      (s) => s.isFile(),
      () => false,
    );
    const kraneIgnore = hasIgnore ? [`--exclude-from=${ignoreFile}`] : [];
    const listed = nul(
      await git([...gitDir, "ls-files", "-z", "--cached", "--others", "--exclude-standard", ...kraneIgnore], dir),
    );
    // Tracked files are listed whatever the excludes say; .kraneignore's apply to them too.
    const ignoredTracked = hasIgnore
      ? new Set(nul(await git([...gitDir, "ls-files", "-z", "--cached", "--ignored", ...kraneIgnore], dir)))
      : new Set<string>();
    return [...new Set(listed)].filter((p) => !ignoredTracked.has(p)).sort();
  } finally {
    if (scratch) await rm(scratch, { recursive: true, force: true });
  }
}

/**
 * Packs `dir` (see the top of this file). Throws SourceDirError when its files add up to more
 * than `maxBytes` before compression, or the archive to more than `maxArchiveBytes`.
 */
export async function packSourceDir(
  dir: string,
  limits: { maxBytes: number; maxArchiveBytes: number },
): Promise<PackedSource> {
  const st = await lstat(dir).catch(() => undefined);
  if (!st?.isDirectory()) throw new SourceDirError(`${dir} is not a directory`);
  const entries: TarEntry[] = [];
  let bytes = 0;
  for (const path of await sourcePaths(dir)) {
    const full = join(dir, ...path.split("/"));
    // A path listed but gone since (deleted, not yet committed) is not part of the source.
    const s = await lstat(full).catch(() => undefined);
    if (!s) continue;
    if (s.isSymbolicLink()) {
      entries.push({ path, type: "symlink", target: await readlink(full) });
    } else if (s.isFile()) {
      bytes += s.size;
      if (bytes > limits.maxBytes)
        throw new SourceDirError(
          `${dir} holds more than ${mib(limits.maxBytes)} of files to upload (${path} crossed it); ` +
            `leave out what the build does not need with ${KRANEIGNORE} (gitignore syntax)`,
        );
      entries.push({ path, type: "file", data: await readFile(full), executable: (s.mode & 0o100) !== 0 });
    }
    // Submodules (directories git lists as one path) and other special files are left out.
  }
  if (entries.length === 0) throw new SourceDirError(`${dir} has no files to upload (all ignored?)`);
  const archive = packTar(entries);
  if (archive.length > limits.maxArchiveBytes)
    throw new SourceDirError(
      `the source archive of ${dir} is ${mib(archive.length)}, over the limit of ${mib(limits.maxArchiveBytes)}`,
    );
  return {
    archive,
    digest: `sha256:${createHash("sha256").update(archive).digest("hex")}`,
    files: entries.length,
    bytes,
  };
}

/** A size for people: KiB below a MiB, else MiB. */
export function mib(n: number): string {
  if (n < 1024 * 1024) return `${Math.ceil(n / 1024)} KiB`;
  return `${(n / 1024 / 1024).toFixed(n < 10 * 1024 * 1024 ? 1 : 0)} MiB`;
}
