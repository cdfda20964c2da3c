// Test helpers for ctrl: temporary SQLite files, servers with an admin token, and clients
// (Connect over HTTP/2 by default) that carry a bearer token; and the check of an RPC error code.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { issueClusterToken } from "../../../src/ctrl/domain/clusters.js";
import { addUserToken, generateToken } from "../../../src/ctrl/domain/tokens.js";
import { Keyring } from "../../../src/ctrl/secrets/keyring.js";
import { startCtrl, type CtrlConfig, type RunningCtrl } from "../../../src/ctrl/server/server.js";

export function tempDir(prefix = "krane-ctrl-"): { path: string; remove: () => void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** A keyring under a fresh random master key (`startTestCtrl(db, { keyring: randomKeyring() })`): ctrl then keeps secrets. */
export function randomKeyring(): Keyring {
  return new Keyring(randomBytes(32));
}

export interface TestCtrl extends RunningCtrl {
  adminToken: string;
  agentToken(region: string, cluster?: string): Promise<string>;
  client<S extends DescService>(service: S, token: string | null, kind?: "connect" | "grpc"): Client<S>;
}

export function bearer(token: string | null): Interceptor {
  return (next) => async (req) => {
    if (token !== null) req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
}

export function transportFor(url: string, token: string | null, kind: "connect" | "grpc" = "connect"): Transport {
  const opts = { baseUrl: url, httpVersion: "2" as const, interceptors: [bearer(token)] };
  return kind === "grpc" ? createGrpcTransport(opts) : createConnectTransport(opts);
}

export async function startTestCtrl(databaseUrl: string, extra: Partial<CtrlConfig> = {}): Promise<TestCtrl> {
  const ctrl = await startCtrl({
    databaseUrl,
    listen: { host: "127.0.0.1", port: 0 },
    opsListen: { host: "127.0.0.1", port: 0 },
    shutdownGraceMs: 2000,
    ...extra,
  });
  const adminToken = generateToken("user");
  await addUserToken(ctrl.store, "admin", adminToken);
  return {
    ...ctrl,
    adminToken,
    async agentToken(region, cluster = "default") {
      return (await issueClusterToken(ctrl.store, region, cluster)).token;
    },
    client(service, token, kind = "connect") {
      return createClient(service, transportFor(ctrl.url, token, kind));
    },
  };
}

/**
 * A watch stream without its bookmarks (ctrl's "up to date at N" keep-alives, the first message
 * of every stream and then one per quiet keepalive interval): the changes and snapshot markers a
 * test compares.
 */
export async function* withoutBookmarks<T extends { readonly state: { readonly case: string | undefined } }>(
  stream: AsyncIterable<T>,
): AsyncGenerator<T> {
  for await (const m of stream) if (m.state.case !== "bookmark") yield m;
}

/** Asserts that `p` fails with `code` (and a message matching `message`, when given). */
export async function expectCode(p: Promise<unknown>, code: Code, message?: RegExp): Promise<void> {
  await assert.rejects(p, (e) => {
    const ce = ConnectError.from(e);
    assert.equal(Code[ce.code], Code[code], ce.rawMessage);
    if (message) assert.match(ce.rawMessage, message);
    return true;
  });
}
