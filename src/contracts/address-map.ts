// Where the sentinel connects for an endpoint address. On a real cluster that is the pod IP
// itself. The local cluster (src/cluster) cannot give pods loopback IPs, because the API server
// refuses them in EndpointSlices, so its pods get 10.X.0.0/16 addresses and this machine serves
// them at the same offset in 127.X.0.0/16; `--pod-address-map 10.X.0.0/16=127.X.0.0/16` tells a
// sentinel so. Pure: parsing and mapping only.
import { isIPv4 } from "node:net";

export interface Cidr {
  /** The network address as an unsigned 32-bit integer. */
  readonly base: number;
  readonly prefix: number;
}

export interface AddressMapping {
  readonly from: Cidr;
  readonly to: Cidr;
}

export function ipv4ToInt(ip: string): number {
  const parts = ip.split(".").map(Number);
  return (((parts[0] ?? 0) << 24) | ((parts[1] ?? 0) << 16) | ((parts[2] ?? 0) << 8) | (parts[3] ?? 0)) >>> 0;
}

export function intToIpv4(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
}

function mask(prefix: number): number {
  return prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
}

/** Parses "a.b.c.d/n"; throws an Error naming the bad part. */
export function parseCidr(text: string): Cidr {
  const m = /^([0-9.]+)\/(\d{1,2})$/.exec(text.trim());
  if (!m || !isIPv4(m[1] ?? "")) throw new Error(`"${text}" is not an IPv4 CIDR (a.b.c.d/n)`);
  const prefix = Number(m[2]);
  if (prefix > 32) throw new Error(`"${text}": the prefix length must be 0–32`);
  const base = ipv4ToInt(m[1] ?? "");
  if ((base & ~mask(prefix)) >>> 0 !== 0) throw new Error(`"${text}" has host bits set`);
  return { base, prefix };
}

export function formatCidr(c: Cidr): string {
  return `${intToIpv4(c.base)}/${c.prefix}`;
}

export function cidrContains(c: Cidr, ip: string): boolean {
  return isIPv4(ip) && (ipv4ToInt(ip) & mask(c.prefix)) >>> 0 === c.base;
}

/** Parses "FROM=TO" (two CIDRs of the same size). */
export function parseAddressMapping(text: string): AddressMapping {
  const [a, b, ...rest] = text.split("=");
  if (a === undefined || b === undefined || rest.length > 0)
    throw new Error(`pod address map "${text}": expected FROM_CIDR=TO_CIDR`);
  const from = parseCidr(a);
  const to = parseCidr(b);
  if (from.prefix !== to.prefix)
    throw new Error(`pod address map "${text}": both CIDRs must have the same prefix length`);
  return { from, to };
}

export function formatAddressMapping(m: AddressMapping): string {
  return `${formatCidr(m.from)}=${formatCidr(m.to)}`;
}

/** The address to connect to for `ip`: mapped when it lies in `from`, else unchanged. */
export function mapAddress(ip: string, m: AddressMapping | undefined): string {
  if (!m || !cidrContains(m.from, ip)) return ip;
  const offset = (ipv4ToInt(ip) & ~mask(m.from.prefix)) >>> 0;
  return intToIpv4((m.to.base | offset) >>> 0);
}
