// The work of `krane login` and `krane logout` (login.ts says why a loopback redirect): loaded
// only when one of them runs.
import { spawn } from "node:child_process";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { parseDuration } from "./calls.js";
import { ctrlKey, loadSession, postSignIn, saveSession, sessionFromAnswer, configPath } from "./cli-config.js";
import type { ConnectionFlags } from "./user-client.js";

const DEFAULT_CTRL = "http://127.0.0.1:7070";

/** Opens a URL in the person's browser, best effort (the URL is printed anyway). */
function openBrowser(url: string): void {
  const [cmd, args] =
    process.platform === "darwin"
      ? ["open", [url]]
      : process.platform === "win32"
        ? ["cmd", ["/c", "start", "", url]]
        : ["xdg-open", [url]];
  try {
    const child = spawn(cmd, args, { stdio: "ignore", detached: true });
    child.on("error", () => undefined);
    child.unref();
  } catch {
    // No opener: the printed URL does.
  }
}

function page(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" });
  const escaped = text.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
  res.end(`<!doctype html><meta charset="utf-8"><title>krane</title><p>${escaped}</p>\n`);
}

/**
 * Waits for the provider to send the browser back to the listener with this sign-in's state:
 * answers the callback URL, and lets `finish` write the page the browser shows.
 */
function awaitCallback(
  server: ReturnType<typeof createServer>,
  redirectUri: string,
  state: string,
  timeoutMs: number,
): Promise<{ callbackUrl: string; res: ServerResponse }> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`nobody came back from the provider in ${timeoutMs / 1000} s: krane login again`)),
      timeoutMs,
    );
    server.on("request", (req: IncomingMessage, res: ServerResponse) => {
      const url = new URL(req.url ?? "/", redirectUri);
      // Anything else on this port (a favicon, a stray request) is not the answer.
      if (req.method !== "GET" || url.pathname !== "/callback" || url.searchParams.get("state") !== state)
        return page(res, 404, "Not this sign-in's answer.");
      clearTimeout(timer);
      resolve({ callbackUrl: `${redirectUri}${url.search}`, res });
    });
  });
}

export async function login(flags: ConnectionFlags & { browser: boolean; timeout: string }): Promise<void> {
  const ctrlUrl = flags.ctrlUrl || DEFAULT_CTRL;
  const timeoutMs = parseDuration(flags.timeout);
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  try {
    const redirectUri = `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`;
    const begun = await postSignIn(ctrlUrl, "begin", { redirect_uri: redirectUri, workspace: flags.workspace ?? "" });
    const authorizationUrl = typeof begun.authorization_url === "string" ? begun.authorization_url : "";
    const state = authorizationUrl === "" ? null : new URL(authorizationUrl).searchParams.get("state");
    if (state === null) throw new Error("ctrl answered no sign-in URL");
    process.stderr.write(`Sign in at:\n  ${authorizationUrl}\n`);
    if (flags.browser) openBrowser(authorizationUrl);
    const { callbackUrl, res } = await awaitCallback(server, redirectUri, state, timeoutMs);
    let answer: Record<string, unknown>;
    try {
      answer = await postSignIn(ctrlUrl, "complete", { callback_url: callbackUrl, client: "cli" });
    } catch (err) {
      page(res, 403, `Sign-in refused: ${err instanceof Error ? err.message : String(err)}`);
      throw err;
    }
    const session = sessionFromAnswer(answer);
    await saveSession(ctrlUrl, session);
    page(res, 200, `Signed in to krane as ${session.email}. You can close this tab.`);
    process.stdout.write(
      `signed in to workspace ${session.workspace} as ${session.email} (${session.role}); session ${session.sessionId} stored in ${configPath()}\n`,
    );
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

export async function logout(flags: ConnectionFlags): Promise<void> {
  const ctrlUrl = flags.ctrlUrl || DEFAULT_CTRL;
  const stored = await loadSession(ctrlUrl);
  if (!stored) {
    process.stdout.write(`not signed in to ${ctrlKey(ctrlUrl)}\n`);
    return;
  }
  const { runUserCommand } = await import("./user-client.js");
  let ended = "ended at ctrl";
  try {
    await runUserCommand({ ...flags, token: undefined }, async (x) => {
      await x.ctrl.client(x.access.SessionService).revokeSession({ workspace: stored.workspace, id: stored.sessionId });
    });
  } catch (err) {
    // Already over (expired, revoked, its member removed): forgetting it is all that is left.
    const message = err instanceof Error ? err.message : String(err);
    if (!/^(not_found|unauthenticated):|has ended|was revoked/.test(message)) throw err;
    ended = "already over at ctrl";
  }
  await saveSession(ctrlUrl, undefined);
  process.stdout.write(`signed out of ${ctrlKey(ctrlUrl)}: session ${stored.sessionId} ${ended}\n`);
}
