// The local cluster's pod network, and how this machine reaches it (a test and dev harness).
//
// KWOK gives each pod an IP from its node's spec.podCIDR. Pod IPs must not be loopback
// addresses, because the API server refuses those in EndpointSlices (the routing table), so each
// cluster gets 10.S.0.0/16 and this machine serves a pod's ports at the same offset in
// 127.S.0.0/16, which Linux routes to `lo` with no set-up and no privileges (the pod stand-in
// binds there; a sentinel is told with --pod-address-map). Several clusters run at once on one
// machine (parallel tests, several people), so each claims its own S through a lock file in
// the machine's temp directory; the lock names the cluster's directory, and a lock whose
// directory is gone is stale (the reaper removes both when the owner dies).
import { existsSync } from "node:fs";
import { mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { mapAddress, parseAddressMapping, type AddressMapping } from "../contracts/address-map.js";

export interface PodNetwork {
  /** The second octet S shared by both ranges. */
  readonly slot: number;
  /** Where pod IPs come from: 10.S.0.0/16. */
  readonly cidr: string;
  /** Where this machine serves them: 127.S.0.0/16. */
  readonly localCidr: string;
}

/** S is taken from this range (clear of the Service range 10.96/16 and KWOK's default 10.244/16). */
export const FIRST_SLOT = 128;
export const LAST_SLOT = 239;

export function podNetworkForSlot(slot: number): PodNetwork {
  if (!Number.isInteger(slot) || slot < FIRST_SLOT || slot > LAST_SLOT)
    throw new Error(`pod network slot ${slot} is outside ${FIRST_SLOT}–${LAST_SLOT}`);
  return { slot, cidr: `10.${slot}.0.0/16`, localCidr: `127.${slot}.0.0/16` };
}

/** "10.S.0.0/16=127.S.0.0/16", the value of a sentinel's --pod-address-map. */
export function podAddressMap(net: PodNetwork): string {
  return `${net.cidr}=${net.localCidr}`;
}

export function podAddressMapping(net: PodNetwork): AddressMapping {
  return parseAddressMapping(podAddressMap(net));
}

/** The address on this machine where a pod IP of this network is served. */
export function localAddress(net: PodNetwork, podIp: string): string {
  return mapAddress(podIp, podAddressMapping(net));
}

/**
 * Addresses in each node's pod CIDR when a cluster has `nodes` KWOK nodes (nodePodCidrs) sharing
 * 10.S.0.0/`space` (16; 17 in a cluster with real nodes, whose pods use the upper half).
 */
export function nodePodCidrSize(nodes: number, space: 16 | 17 = 16): number {
  const bits = Math.max(0, Math.ceil(Math.log2(Math.max(1, nodes))));
  const prefix = space + bits;
  if (prefix > 24) throw new Error(`${nodes} nodes do not fit one /${space} pod network with a /24 or more each`);
  return 2 ** (32 - prefix);
}

/**
 * Splits 10.S.0.0/`space` into one pod CIDR per node, as large as possible (at least /24: KWOK
 * hands out addresses without checking its range, so a node must never run out into its neighbour's).
 */
export function nodePodCidrs(net: PodNetwork, nodes: number, space: 16 | 17 = 16): string[] {
  const size = nodePodCidrSize(nodes, space);
  const prefix = 32 - Math.log2(size);
  return Array.from({ length: nodes }, (_, i) => {
    const offset = i * size;
    return `10.${net.slot}.${Math.floor(offset / 256)}.${offset % 256}/${prefix}`;
  });
}

export function podNetworkLockDir(): string {
  return join(tmpdir(), "krane-pod-networks");
}

function lockFile(slot: number): string {
  return join(podNetworkLockDir(), String(slot));
}

/**
 * Takes `slot` for `clusterDir` if it is free, already ours (a detached cluster started again), or
 * stale (its cluster directory is gone and the lock is over a minute old). False if taken.
 */
export async function tryClaimSlot(slot: number, clusterDir: string): Promise<boolean> {
  const file = lockFile(slot);
  try {
    await writeFile(file, clusterDir, { flag: "wx" });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
  const owner = await readFile(file, "utf8").catch(() => "");
  if (owner === clusterDir) return true;
  const age = await stat(file).then(
    (s) => Date.now() - s.mtimeMs,
    () => 0,
  );
  if (owner === "" || existsSync(owner) || age <= 60_000) return false;
  // Stale: take it over, unless somebody else does at the same moment.
  await rm(file, { force: true });
  try {
    await writeFile(file, clusterDir, { flag: "wx" });
    return true;
  } catch {
    return false;
  }
}

/** Claims a pod network for the cluster living in `clusterDir` (its own one first, if it has one). */
export async function claimPodNetwork(clusterDir: string): Promise<PodNetwork> {
  await mkdir(podNetworkLockDir(), { recursive: true });
  const count = LAST_SLOT - FIRST_SLOT + 1;
  for (let slot = FIRST_SLOT; slot <= LAST_SLOT; slot++) {
    if ((await readFile(lockFile(slot), "utf8").catch(() => "")) === clusterDir) return podNetworkForSlot(slot);
  }
  const start = Math.floor(Math.random() * count);
  for (let i = 0; i < count; i++) {
    const slot = FIRST_SLOT + ((start + i) % count);
    if (await tryClaimSlot(slot, clusterDir)) return podNetworkForSlot(slot);
  }
  throw new Error(`all ${count} local pod networks are taken (locks in ${podNetworkLockDir()}); stop some clusters`);
}

export async function releasePodNetwork(net: PodNetwork, clusterDir: string): Promise<void> {
  const file = lockFile(net.slot);
  const owner = await readFile(file, "utf8").catch(() => undefined);
  if (owner === clusterDir) await rm(file, { force: true });
}

/** The lock file of a pod network (the reaper removes it with the cluster's directory). */
export function podNetworkLockFile(net: PodNetwork): string {
  return lockFile(net.slot);
}
