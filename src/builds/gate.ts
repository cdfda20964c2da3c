// The gate of a builder pod: how the agent's buildctl reaches the pod's buildkitd.
//
// buildkitd runs in an empty network namespace (scripts/bases/builder-entry.sh) and listens only
// on a unix socket in a volume its pod shares with the gate container. The gate listens on the
// pod's network and passes each connection to that socket once it has proved it holds the
// build's key: TLS with a pre-shared key (one per build, 32 random bytes, in a Secret only the
// pod mounts), so nothing else on the cluster's network can reach the daemon, run steps on it or
// read what goes through. The agent's side (`dialGate`) is a unix socket of its own that
// buildctl is pointed at, each connection to it carried to the gate the same way.
import { once } from "node:events";
import { rm } from "node:fs/promises";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { connect as tlsConnect, createServer as createTlsServer, type TLSSocket } from "node:tls";

/** The identity both ends name; the key is what proves the build. */
export const GATE_IDENTITY = "krane-builder";
/** A cipher suite with a pre-shared key and forward-secret-free but authenticated encryption. */
const TLS = { ciphers: "PSK-AES256-GCM-SHA384", minVersion: "TLSv1.2", maxVersion: "TLSv1.2" } as const;
/** The key's length in bytes (hex in the Secret: twice that). */
export const GATE_KEY_BYTES = 32;

/** The key as the Secret holds it (hex), checked. */
export function parseGateKey(text: string): Buffer {
  const hex = text.trim();
  if (!new RegExp(`^[0-9a-f]{${GATE_KEY_BYTES * 2}}$`).test(hex))
    throw new Error(`the builder gate's key must be ${GATE_KEY_BYTES * 2} lowercase hex digits`);
  return Buffer.from(hex, "hex");
}

/** Both ways until either side ends; either side's error or end closes the other. */
function join(a: Socket, b: Socket, open: Set<Socket>): void {
  open.add(a);
  a.once("close", () => open.delete(a));
  a.pipe(b);
  b.pipe(a);
  const close = (): void => {
    a.destroy();
    b.destroy();
  };
  for (const s of [a, b]) {
    s.once("error", close);
    s.once("close", close);
  }
}

export interface GateServer {
  readonly port: number;
  close(): Promise<void>;
}

/** The pod's side: TLS-PSK on `port` (all addresses), each proven connection to `socket`. */
export async function serveGate(o: { port: number; socket: string; key: Buffer; host?: string }): Promise<GateServer> {
  const open = new Set<Socket>();
  const server = createTlsServer(
    { ...TLS, pskCallback: (_s: TLSSocket, identity: string) => (identity === GATE_IDENTITY ? o.key : null) },
    (conn) => join(conn, createConnection(o.socket), open),
  );
  // A failed handshake (a wrong key, a port scan) only ends that connection.
  server.on("tlsClientError", (_err, s) => s.destroy());
  server.listen(o.port, o.host);
  await once(server, "listening");
  const address = server.address();
  return {
    port: typeof address === "object" && address ? address.port : o.port,
    close: () => closeServer(server, open),
  };
}

export interface GateDialer {
  /** The unix socket buildctl is pointed at (`--addr unix://…`). */
  readonly socket: string;
  close(): Promise<void>;
}

/** The agent's side: a unix socket at `socket` whose connections go to the gate at host:port. */
export async function dialGate(o: { host: string; port: number; key: Buffer; socket: string }): Promise<GateDialer> {
  await rm(o.socket, { force: true });
  const open = new Set<Socket>();
  const server = createServer((local) => {
    const remote = tlsConnect({
      ...TLS,
      host: o.host,
      port: o.port,
      pskCallback: () => ({ psk: o.key, identity: GATE_IDENTITY }),
      // The key authenticates the server: there is no certificate to check.
      checkServerIdentity: () => undefined,
    });
    join(local, remote, open);
  });
  server.listen(o.socket);
  await once(server, "listening");
  return {
    socket: o.socket,
    close: async () => {
      await closeServer(server, open);
      await rm(o.socket, { force: true });
    },
  };
}

/** Stops listening and ends the connections still open (a build that ended leaves none). */
async function closeServer(server: Server, open: Set<Socket>): Promise<void> {
  if (!server.listening) return;
  const closed = once(server, "close");
  server.close();
  for (const s of open) s.destroy();
  await closed;
}
