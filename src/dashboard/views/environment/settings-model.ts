// The config tab's derived columns (pure).
import type { AddressRegionStatus } from "../../../gen/krane/ctrl/v1/exposure_pb.js";
import type { SecretEntry } from "../../../gen/krane/ctrl/v1/config_pb.js";

/** Per region, whether the environment's Gateway has programmed the address's HTTPS listeners ("-": none reported). */
export function httpsPerRegion(regions: readonly AddressRegionStatus[]): string {
  return regions
    .map((r) => {
      const listeners = (r.route?.certificates ?? []).flatMap((c) => (c.listener ? [c.listener] : []));
      const off = listeners.find((l) => l.status !== "True");
      const state =
        listeners.length === 0 ? "-" : !off ? "programmed" : off.status === "" ? "pending" : off.reason || off.status;
      return `${r.region}: ${state}`;
    })
    .join(", ");
}

/** Per region, how ready an endpoint or domain is. */
export function readinessPerRegion(regions: readonly { region: string; readiness: string }[]): string {
  return regions.map((r) => `${r.region}: ${r.readiness}`).join(", ");
}

/** Where a secret's value comes from (never the value). */
export function secretSource(s: SecretEntry): string {
  return s.source === "external" ? `external: ${s.externalPath}` : "value";
}
