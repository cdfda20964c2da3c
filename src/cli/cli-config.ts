// The CLI's config file: the sign-in sessions `krane login` made, one per ctrl URL. It holds
// bearer secrets, so it is written 0600 in a 0700 folder, whole (a temporary file renamed over
// it, so a crash leaves the old one or the new one); a file others may read is refused rather
// than used. Path: $KRANE_CONFIG, else $XDG_CONFIG_HOME/krane/config.json, else
// ~/.config/krane/config.json.
//
// A stored session's access token lasts minutes (ctrl's 5 by default): `sessionBearer` refreshes
// it through ctrl's `POST /auth/oidc/refresh` shortly before it ends, and stores the new pair
// (the refresh token is replaced at each use). Two commands refreshing at once: the loser's
// refresh token is already spent, so it reads the file again and takes the winner's pair.
import { chmod, mkdir, readFile, rename, stat, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { dirname, join } from "node:path";

export interface StoredSession {
  sessionId: string;
  accessToken: string;
  refreshToken: string;
  /** Unix ms. */
  accessExpiresAt: number;
  expiresAt: number;
  workspace: string;
  email: string;
  role: string;
}

interface ConfigFile {
  sessions: Record<string, StoredSession>;
}

export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.KRANE_CONFIG) return env.KRANE_CONFIG;
  const base = env.XDG_CONFIG_HOME || join(homedir(), ".config");
  return join(base, "krane", "config.json");
}

/** The key a session is stored under: the ctrl URL without a trailing slash. */
export function ctrlKey(ctrlUrl: string): string {
  return ctrlUrl.replace(/\/+$/, "");
}

function isSession(v: unknown): v is StoredSession {
  if (typeof v !== "object" || v === null) return false;
  const s = v as Record<string, unknown>;
  return (
    ["sessionId", "accessToken", "refreshToken", "workspace", "email", "role"].every((k) => typeof s[k] === "string") &&
    typeof s.accessExpiresAt === "number" &&
    typeof s.expiresAt === "number"
  );
}

async function readConfig(path: string): Promise<ConfigFile> {
  let text: string;
  try {
    const st = await stat(path);
    if ((st.mode & 0o077) !== 0)
      throw new Error(`${path} may be read by others (mode ${(st.mode & 0o777).toString(8)}): chmod 600 it`);
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { sessions: {} };
    throw err;
  }
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new Error(`${path}: not JSON (remove it and krane login again)`);
  }
  const sessions: Record<string, StoredSession> = {};
  const raw = (v as { sessions?: unknown } | null)?.sessions;
  if (typeof raw === "object" && raw !== null)
    for (const [k, s] of Object.entries(raw)) if (isSession(s)) sessions[k] = s;
  return { sessions };
}

async function writeConfig(path: string, config: ConfigFile): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  // writeFile's mode holds only for a new file.
  await chmod(tmp, 0o600);
  await rename(tmp, path);
}

export async function loadSession(ctrlUrl: string, path = configPath()): Promise<StoredSession | undefined> {
  return (await readConfig(path)).sessions[ctrlKey(ctrlUrl)];
}

/** Stores (or, with undefined, forgets) the session of a ctrl. */
export async function saveSession(
  ctrlUrl: string,
  session: StoredSession | undefined,
  path = configPath(),
): Promise<void> {
  const config = await readConfig(path);
  if (session === undefined) delete config.sessions[ctrlKey(ctrlUrl)];
  else config.sessions[ctrlKey(ctrlUrl)] = session;
  await writeConfig(path, config);
}

/** ctrl's session answer (src/ctrl/dashboard/sign-in.ts) → what is stored, keeping what a refresh leaves out. */
export function sessionFromAnswer(body: Record<string, unknown>, before?: StoredSession): StoredSession {
  const str = (v: unknown, what: string): string => {
    if (typeof v !== "string" || v === "") throw new Error(`ctrl's sign-in answer has no ${what}`);
    return v;
  };
  const time = (v: unknown, what: string): number => {
    const t = Date.parse(str(v, what));
    if (Number.isNaN(t)) throw new Error(`ctrl's sign-in answer has a bad ${what}`);
    return t;
  };
  const ws = body.workspace as { slug?: unknown } | undefined;
  const member = body.member as { email?: unknown; role?: unknown } | undefined;
  return {
    sessionId: str(body.session_id, "session_id"),
    accessToken: str(body.access_token, "access_token"),
    refreshToken: str(body.refresh_token, "refresh_token"),
    accessExpiresAt: time(body.access_expires_at, "access_expires_at"),
    expiresAt: time(body.expires_at, "expires_at"),
    workspace: typeof ws?.slug === "string" ? ws.slug : (before?.workspace ?? ""),
    email: typeof member?.email === "string" ? member.email : (before?.email ?? ""),
    role: typeof member?.role === "string" ? member.role : (before?.role ?? ""),
  };
}

/** POSTs JSON to ctrl's sign-in endpoints; a refusal throws with ctrl's message and status. */
export async function postSignIn(
  ctrlUrl: string,
  what: "begin" | "complete" | "refresh",
  body: object,
): Promise<Record<string, unknown>> {
  const res = await fetch(`${ctrlKey(ctrlUrl)}/auth/oidc/${what}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let answer: Record<string, unknown> = {};
  try {
    answer = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // Not ctrl's JSON (a proxy's page): the status says enough.
  }
  if (!res.ok)
    throw new SignInError(
      res.status,
      `${what}: ${typeof answer.message === "string" ? answer.message : `ctrl answered ${res.status}`}`,
    );
  return answer;
}

export class SignInError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "SignInError";
  }
}

/** Refresh this long before the access token ends (clock skew, the call's own time). */
const REFRESH_MARGIN_MS = 30_000;

/**
 * The bearer token of the session stored for ctrlUrl, refreshed when it is about to end (or
 * `force`d, after ctrl refused it): undefined when none is stored.
 */
export function sessionBearer(ctrlUrl: string, path = configPath()): (force?: boolean) => Promise<string | undefined> {
  let current: StoredSession | undefined;
  let loaded = false;
  return async (force = false) => {
    if (!loaded) {
      current = await loadSession(ctrlUrl, path);
      loaded = true;
    }
    const s = current;
    if (!s) return undefined;
    if (!force && s.accessExpiresAt - REFRESH_MARGIN_MS > Date.now()) return s.accessToken;
    if (s.expiresAt <= Date.now()) throw new Error(`your session with ${ctrlUrl} has ended: krane login`);
    try {
      current = sessionFromAnswer(await postSignIn(ctrlUrl, "refresh", { refresh_token: s.refreshToken }), s);
    } catch (err) {
      if (!(err instanceof SignInError) || err.status !== 401) throw err;
      // Another command may have refreshed first: its pair is in the file.
      const again = await loadSession(ctrlUrl, path);
      if (again && again.refreshToken !== s.refreshToken && again.accessExpiresAt > Date.now()) {
        current = again;
        return again.accessToken;
      }
      throw new Error(`your session with ${ctrlUrl} has ended or was revoked: krane login`);
    }
    await saveSession(ctrlUrl, current, path);
    return current.accessToken;
  };
}

/**
 * A command's bearer token: --token / KRANE_TOKEN, else the session stored for ctrlUrl.
 * `refresh` (absent for a token given) forces a refresh after ctrl refused the access token.
 */
export function commandBearer(
  flag: string | undefined,
  ctrlUrl: string,
): { token: () => Promise<string>; refresh?: () => Promise<void> } {
  if (flag) return { token: () => Promise.resolve(flag) };
  const bearer = sessionBearer(ctrlUrl);
  return {
    token: async () => {
      const t = await bearer();
      if (t === undefined)
        throw new Error(
          `no API token: pass --token or set KRANE_TOKEN, or sign in with krane login --ctrl-url ${ctrlUrl}`,
        );
      return t;
    },
    refresh: async () => {
      await bearer(true);
    },
  };
}
