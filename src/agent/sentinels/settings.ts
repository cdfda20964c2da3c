// The sentinel kind's settings: what the agent gives it beside the region and ctrl client.
import type { Registry } from "prom-client";
import type { AddressMapping } from "../../contracts/address-map.js";

/** The agent's settings for sentinels whose environment names no image of its own. */
export interface SentinelDefaults {
  /** krane's image, run as `krane sentinel`. */
  readonly image: string;
  /** How often the sentinels' pods are asked what they serve (default 5 s). */
  readonly observeIntervalMs?: number;
  /** Local cluster only: where pod IPs are served on this machine (src/contracts/address-map.ts). */
  readonly podAddressMap?: AddressMapping;
  /** How often the sentinels' metrics are collected for rollout analysis (default 10 s; 0: never). */
  readonly measureIntervalMs?: number;
  /** The agent's metrics registry (the collector's scrape and report counters). */
  readonly registry?: Registry;
  /** How often the region's autoscaler decides (default 2 s; src/agent/autoscale). */
  readonly autoscaleIntervalMs?: number;
  /** How often the instances' usage is read for the metrics history (default 15 s, metrics-server's resolution; 0: never). */
  readonly usageIntervalMs?: number;
}

/** What the sentinel kind is built with beside the runtime's KindEnv. */
export interface SentinelEnv {
  /** What a sentinel runs when its environment names no image of its own. */
  readonly sentinel: SentinelDefaults;
}
