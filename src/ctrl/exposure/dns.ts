// The DNS resolver domain verification uses: node:dns's Resolver, on the system's servers or on
// the ones configured (`ctrl serve --dns-servers`, e.g. a resolver that sees the public DNS, or a
// test's server on loopback), with a bounded timeout so a slow server never stalls the checks.
import { Resolver } from "node:dns/promises";
import type { TxtResolver } from "../domain/domains.js";

export interface DnsOptions {
  /** "host" or "host:port" entries; empty: the system's resolvers. */
  readonly servers?: readonly string[];
  readonly timeoutMs?: number;
  readonly tries?: number;
}

export function systemTxtResolver(o: DnsOptions = {}): TxtResolver {
  const resolver = new Resolver({ timeout: o.timeoutMs ?? 5_000, tries: o.tries ?? 2 });
  if (o.servers && o.servers.length > 0) resolver.setServers([...o.servers]);
  return { resolveTxt: (name) => resolver.resolveTxt(name) };
}
