// One commit of a repository, fetched with the system's git into a directory, for a build: over
// HTTPS with a token, or over SSH with a deploy key. The secret never reaches a command line or a
// URL: git asks for the token through GIT_ASKPASS (a script that prints it from git's
// environment), and ssh reads the key from a file only this process's user can read, in a
// scratch directory removed afterwards. git runs with an environment of its own (no system or
// user configuration, no credential helpers, no prompts) and only the https and ssh transports.
// Its errors come back worded for people, with any trace of the secret cut out.
import { execFile } from "node:child_process";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export type RepositoryTransport = "https" | "ssh";

export type GitCredential =
  | { readonly kind: "token"; readonly token: string; readonly username?: string }
  | { readonly kind: "deploy_key"; readonly privateKey: string };

/** A fetch that failed; the message says why in words (the credential, the commit, the network). */
export class GitFetchFailed extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GitFetchFailed";
  }
}

const HTTPS = /^https:\/\/([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:\d{1,5})?\/[A-Za-z0-9._~\-/%]+$/;
// User, host and path start with a letter or digit: nothing ssh could read as an option.
const SSH_URL = /^ssh:\/\/[A-Za-z0-9][A-Za-z0-9._-]*@[A-Za-z0-9][A-Za-z0-9.-]*(:\d{1,5})?\/[A-Za-z0-9._~\-/]+$/;
const SCP_LIKE = /^[A-Za-z0-9][A-Za-z0-9._-]*@[A-Za-z0-9][A-Za-z0-9.-]*:[A-Za-z0-9_~][A-Za-z0-9._~\-/]*$/;
export const COMMIT = /^[0-9a-f]{40}$/;

/**
 * How a repository URL is reached, or why it is refused (a problem worded for `url: …`). A URL
 * holds no credentials: they are given apart, and sealed.
 */
export function repositoryTransport(
  url: string,
): { ok: true; transport: RepositoryTransport } | { ok: false; problem: string } {
  if (url.length > 2048) return { ok: false, problem: "is longer than 2048 characters" };
  if (/^https:\/\/[^/]*@/.test(url))
    return { ok: false, problem: "must not hold credentials (give the token with --token-stdin)" };
  if (HTTPS.test(url)) return { ok: true, transport: "https" };
  if (SSH_URL.test(url) || SCP_LIKE.test(url)) return { ok: true, transport: "ssh" };
  return {
    ok: false,
    problem:
      "must be an https URL (https://host/owner/repo.git) or an ssh one (git@host:owner/repo.git, ssh://git@host/owner/repo.git)",
  };
}

// git asks "Username for '…': " then "Password for '…': "; the answers are in its environment.
const ASKPASS = `#!/bin/sh
case "$1" in
  Username*) printf '%s\\n' "$KRANE_GIT_USERNAME" ;;
  *) printf '%s\\n' "$KRANE_GIT_TOKEN" ;;
esac
`;

/** What git said, as a reason a person can act on; `secret` never appears in it. */
export function fetchFailure(url: string, commit: string, stderr: string, secret: string): string {
  const said = stderr
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("hint:"));
  const cut = (s: string): string => (secret.length >= 4 ? s.split(secret).join("***") : s);
  const last = cut(said.at(-1) ?? "git failed without a message");
  const all = said.join("\n");
  if (
    /Authentication failed|could not read (Username|Password)|terminal prompts disabled|returned error: 40[13]/.test(
      all,
    )
  )
    return `the repository ${url} refused the token (HTTP 401/403): it is wrong, expired, or lacks read access`;
  if (/Permission denied \(publickey|Host key verification failed/.test(all))
    return `the repository ${url} refused the deploy key (${last})`;
  if (
    /not our ref|unadvertised object|couldn't find remote ref|no such remote ref|did not send all necessary objects/.test(
      all,
    )
  )
    return `commit ${commit} is not in the repository ${url}`;
  if (
    /Could not resolve host|Connection refused|Failed to connect|Connection timed out|Network is unreachable|Could not read from remote/.test(
      all,
    )
  )
    return `the repository ${url} is unreachable (${last})`;
  if (/repository '.*' not found|does not appear to be a git repository|HTTP 404|returned error: 404/.test(all))
    return `no repository at ${url} (or the credential cannot see it)`;
  return `fetching ${url} failed: ${last}`;
}

export interface FetchCommitRequest {
  readonly url: string;
  /** 40 hex digits. */
  readonly commit: string;
  readonly credential?: GitCredential;
  /** An empty (or missing) directory the commit is checked out into. */
  readonly dir: string;
  /** CA certificates (a PEM file) the server's certificate may come from, instead of the system's. */
  readonly caFile?: string;
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
}

/** Fetches `commit` alone (depth 1) and checks it out in `dir`; throws GitFetchFailed. */
export async function fetchCommit(r: FetchCommitRequest): Promise<void> {
  if (!COMMIT.test(r.commit)) throw new GitFetchFailed(`commit "${r.commit}" is not 40 hex digits`);
  const kind = repositoryTransport(r.url);
  if (!kind.ok) throw new GitFetchFailed(`url: ${kind.problem}`);
  const scratch = await mkdtemp(join(tmpdir(), "krane-git-"));
  const secret =
    r.credential?.kind === "token"
      ? r.credential.token
      : r.credential?.kind === "deploy_key"
        ? r.credential.privateKey
        : "";
  try {
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: scratch,
      LC_ALL: "C",
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: "/dev/null",
      GIT_TERMINAL_PROMPT: "0",
      GIT_ASKPASS: "/bin/false",
      SSH_ASKPASS: "/bin/false",
      // No key: ssh must not try the agent or this user's keys either.
      GIT_SSH_COMMAND: "ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -o IdentityFile=none",
    };
    if (r.caFile !== undefined) env.GIT_SSL_CAINFO = r.caFile;
    if (r.credential?.kind === "token") {
      const askpass = join(scratch, "askpass.sh");
      await writeFile(askpass, ASKPASS, { mode: 0o700 });
      env.GIT_ASKPASS = askpass;
      env.KRANE_GIT_USERNAME = r.credential.username ?? "x-access-token";
      env.KRANE_GIT_TOKEN = r.credential.token;
    } else if (r.credential?.kind === "deploy_key") {
      const key = join(scratch, "deploy_key");
      const pem = r.credential.privateKey.endsWith("\n") ? r.credential.privateKey : `${r.credential.privateKey}\n`;
      await writeFile(key, pem, { mode: 0o600 });
      await chmod(key, 0o600);
      // The host's key is accepted the first time (no known_hosts is kept across fetches).
      env.GIT_SSH_COMMAND = `ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -i ${join(scratch, "deploy_key")} -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile=${join(scratch, "known_hosts")}`;
    }
    const opts = {
      env,
      timeout: r.timeoutMs ?? 5 * 60_000,
      maxBuffer: 16 * 1024 * 1024,
      ...(r.signal ? { signal: r.signal } : {}),
    };
    const only = [
      "-c",
      "protocol.allow=never",
      "-c",
      `protocol.${kind.transport}.allow=always`,
      "-c",
      "credential.helper=",
      "-c",
      "core.hooksPath=/dev/null",
    ];
    const git = async (args: string[]): Promise<string> => {
      try {
        return (await run("git", [...only, ...args], opts)).stdout;
      } catch (err) {
        const e = err as { code?: string | number; stderr?: string; killed?: boolean; message: string };
        if (e.code === "ENOENT") throw new GitFetchFailed("fetching a repository needs git, which is not on PATH");
        if (r.signal?.aborted) throw new GitFetchFailed("the fetch was cancelled");
        if (e.killed) throw new GitFetchFailed(`fetching ${r.url} took longer than ${opts.timeout / 1000} s`);
        throw new GitFetchFailed(fetchFailure(r.url, r.commit, e.stderr ?? e.message, secret));
      }
    };
    await git(["init", "--quiet", r.dir]);
    await git([
      "-C",
      r.dir,
      "fetch",
      "--quiet",
      "--depth=1",
      "--no-tags",
      "--no-recurse-submodules",
      "--",
      r.url,
      r.commit,
    ]);
    await git(["-C", r.dir, "checkout", "--quiet", "--detach", "FETCH_HEAD"]);
    const head = (await git(["-C", r.dir, "rev-parse", "HEAD"])).trim();
    if (head !== r.commit) throw new GitFetchFailed(`the repository ${r.url} answered ${head} for commit ${r.commit}`);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
