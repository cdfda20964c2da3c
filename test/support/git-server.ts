// A real git server for tests: git's own `git http-backend` (the smart HTTP protocol, as a CGI
// program) behind a small Node HTTPS server that asks for Basic authentication, with its own CA.
// Repositories are bare repositories under `root`; commit() makes a commit in one and answers its
// id. Nothing of git is imitated: clients speak to git itself.
import { execFile, spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { certificates } from "./registry.js";

const run = promisify(execFile);

export interface GitServer {
  /** https://127.0.0.1:<port> */
  readonly url: string;
  /** The CA of its certificate (a PEM file). */
  readonly caFile: string;
  /** Requests it answered with 401 (a wrong or missing token). */
  readonly refused: () => number;
  /** A new bare repository `name` (e.g. "acme/app.git"); answers its URL. */
  createRepository(name: string): Promise<string>;
  /** Commits `files` on `branch` of repository `name` (pushed from a scratch clone); answers the commit id. */
  commit(name: string, branch: string, files: Record<string, string>, message?: string): Promise<string>;
  close(): Promise<void>;
}

const GIT_ENV = { GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null", LC_ALL: "C" };

async function git(args: string[], cwd?: string): Promise<string> {
  const env = { ...process.env, ...GIT_ENV, GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@example.com" };
  const out = await run("git", args, {
    cwd,
    env: { ...env, GIT_COMMITTER_NAME: "t", GIT_COMMITTER_EMAIL: "t@example.com" },
  });
  return out.stdout;
}

export async function startGitServer(dir: string, users: Record<string, string>): Promise<GitServer> {
  const root = join(dir, "git-root");
  const certDir = join(dir, "git-certs");
  mkdirSync(root, { recursive: true });
  mkdirSync(certDir, { recursive: true });
  const certs = await certificates(certDir, "127.0.0.1");
  let refused = 0;
  const server = createServer({ cert: readFileSync(certs.crt), key: readFileSync(certs.key) }, (req, res) => {
    const auth = req.headers.authorization ?? "";
    const [user, ...rest] = Buffer.from(auth.replace(/^Basic /, ""), "base64")
      .toString()
      .split(":");
    if (
      !auth.startsWith("Basic ") ||
      user === undefined ||
      users[user] === undefined ||
      users[user] !== rest.join(":")
    ) {
      refused++;
      res.writeHead(401, { "www-authenticate": 'Basic realm="git"' }).end("unauthorized\n");
      return;
    }
    const [path = "", query = ""] = (req.url ?? "").split("?", 2);
    const cgi = spawn("git", ["http-backend"], {
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        ...GIT_ENV,
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: "1",
        REQUEST_METHOD: req.method ?? "GET",
        PATH_INFO: decodeURIComponent(path),
        QUERY_STRING: query,
        CONTENT_TYPE: req.headers["content-type"] ?? "",
        REMOTE_USER: user,
        REMOTE_ADDR: req.socket.remoteAddress ?? "",
        GIT_PROTOCOL: String(req.headers["git-protocol"] ?? ""),
        HTTP_CONTENT_ENCODING: String(req.headers["content-encoding"] ?? ""),
      },
      stdio: ["pipe", "pipe", "ignore"],
    });
    req.pipe(cgi.stdin);
    // CGI output: headers, a blank line, the body.
    let head = Buffer.alloc(0);
    let sent = false;
    cgi.stdout.on("data", (chunk: Buffer) => {
      if (sent) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      const headers: Record<string, string> = {};
      let status = 200;
      for (const line of head.subarray(0, end).toString().split("\r\n")) {
        const i = line.indexOf(":");
        const k = line.slice(0, i).trim();
        const v = line.slice(i + 1).trim();
        if (k.toLowerCase() === "status") status = Number(v.split(" ")[0]);
        else headers[k] = v;
      }
      res.writeHead(status, headers);
      res.write(head.subarray(end + 4));
      sent = true;
    });
    cgi.on("close", () => {
      if (!sent) res.writeHead(500).end("http-backend said nothing\n");
      else res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    caFile: certs.ca,
    refused: () => refused,
    async createRepository(name) {
      await git(["init", "--quiet", "--bare", join(root, name)]);
      return `${url}/${name}`;
    },
    async commit(name, branch, files, message = "a commit") {
      const work = join(
        dir,
        "git-work",
        `${name.replace(/\W/g, "-")}-${Date.now()}-${Math.random().toString(36).slice(2)}`,
      );
      mkdirSync(work, { recursive: true });
      await git(["init", "--quiet", "-b", branch, work]);
      const bare = join(root, name);
      const has = (await git(["ls-remote", bare, `refs/heads/${branch}`])).trim() !== "";
      if (has) {
        await git(["fetch", "--quiet", bare, branch], work);
        await git(["reset", "--quiet", "--hard", "FETCH_HEAD"], work);
      }
      for (const [p, text] of Object.entries(files)) {
        mkdirSync(join(work, p, ".."), { recursive: true });
        writeFileSync(join(work, p), text);
      }
      await git(["add", "-A"], work);
      await git(["commit", "--quiet", "--allow-empty", "-m", message], work);
      await git(["push", "--quiet", bare, `HEAD:refs/heads/${branch}`], work);
      return (await git(["rev-parse", "HEAD"], work)).trim();
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
