// Listening on an address, and the URL a listener is reached at.
import type * as net from "node:net";
import type * as http from "node:http";
import type { AddressInfo } from "node:net";
import type { Runnable } from "../../base/lifecycle.js";

export interface ListenAddress {
  host: string;
  port: number;
}

export function listen(server: net.Server, addr: ListenAddress): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(addr.port, addr.host, () => {
      server.off("error", reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

/** The URL of a listener on `host` (a wildcard address is reached on loopback). */
export function urlOf(scheme: "http" | "https", host: string, port: number): string {
  const h = host === "0.0.0.0" || host === "::" || host === "" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  return `${scheme}://${h}:${port}`;
}

/** A plain HTTP/1.1 listener as a part of ctrl (the ops port, the webhooks' port). */
export class HttpListener implements Runnable {
  #url = "";

  constructor(
    readonly name: string,
    private readonly server: http.Server,
    private readonly address: ListenAddress,
  ) {}

  /** The base URL, e.g. http://127.0.0.1:7071 (once started). */
  get url(): string {
    return this.#url;
  }

  async start(): Promise<void> {
    const a = await listen(this.server, this.address);
    this.#url = urlOf("http", this.address.host, a.port);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
