// The public API of exposure: EndpointService and DomainService, and the endpoints/domains part
// of an environment's status (each address's readiness per region, from the agents' gateway
// reports). Each handler validates (InvalidArgument naming the field, nothing applied), calls the
// domain, and converts.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import type { Kysely } from "kysely";
import {
  GatewayConditionSchema,
  GatewayRouteStatusSchema,
  type GatewayRouteStatus,
} from "../../gen/krane/ctrl/v1/cluster_pb.js";
import {
  AddressRegionStatusSchema,
  DomainSchema,
  DomainService,
  DomainStatusSchema,
  EndpointAuthSchema,
  EndpointSchema,
  EndpointService,
  EndpointStatusSchema,
  type AddressRegionStatus,
  type Domain,
  type DomainStatus,
  type Endpoint,
  type EndpointStatus,
} from "../../gen/krane/ctrl/v1/exposure_pb.js";
import type { Database, DomainRow, EndpointRow } from "../db/schema.js";
import type { Store } from "../db/store.js";
import { addDomain, removeDomain, txtName, txtValue, NEVER, type DomainCheckPolicy } from "../domain/domains.js";
import { deleteEndpoint, setEndpoint } from "../domain/endpoints.js";
import {
  endpointUrl,
  type ExposureSettings,
  type StoredCondition,
  type StoredRouteStatus,
} from "../domain/exposure.js";
import { domainRouteName, parseEndpointAuth } from "../payloads/gateway.js";
import { exposureOf, findDomain, listDomains, listEndpoints } from "../read/exposure.js";
import { validateEnvironmentRef } from "../validate/api.js";
import { validateDomainRequest, validateSetEndpoint, visibility } from "../validate/exposure.js";

export interface ExposureDeps {
  store: Store;
  settings: ExposureSettings;
  policy: DomainCheckPolicy;
  /** Checks a domain now (the verifier's; absent: the API cannot check on request). */
  verifyNow?: (id: string) => Promise<DomainRow | undefined>;
}

export function endpointMsg(e: EndpointRow, settings: ExposureSettings): Endpoint {
  const auth = parseEndpointAuth(e.auth);
  return create(EndpointSchema, {
    id: e.id,
    environmentId: e.environment_id,
    visibility: e.visibility,
    hostname: e.hostname,
    pathPrefix: e.path_prefix,
    url: endpointUrl(settings, e.hostname, e.path_prefix),
    auth: auth ? create(EndpointAuthSchema, auth) : undefined,
    createdAtUnixMs: BigInt(e.created_at),
    updatedAtUnixMs: BigInt(e.updated_at),
  });
}

export function domainMsg(d: DomainRow): Domain {
  return create(DomainSchema, {
    id: d.id,
    environmentId: d.environment_id,
    hostname: d.hostname,
    state: d.state,
    txtName: txtName(d.hostname),
    txtValue: txtValue(d.token),
    lastError: d.last_error ?? "",
    lastCheckedAtUnixMs: BigInt(d.last_checked_at ?? 0),
    verifiedAtUnixMs: BigInt(d.verified_at ?? 0),
    nextCheckAtUnixMs: BigInt(d.next_check_at === NEVER ? 0 : d.next_check_at),
    createdAtUnixMs: BigInt(d.created_at),
  });
}

export function endpointServiceImpl({ store, settings }: ExposureDeps): ServiceImpl<typeof EndpointService> {
  return {
    async setEndpoint(req) {
      const { endpoint } = await setEndpoint(store, validateSetEndpoint(req), settings);
      return { endpoint: endpointMsg(endpoint, settings) };
    },
    async listEndpoints(req) {
      const { endpoints } = await listEndpoints(store.db, validateEnvironmentRef(req));
      return { endpoints: endpoints.map((e) => endpointMsg(e, settings)) };
    },
    async deleteEndpoint(req) {
      const ref = validateEnvironmentRef(req);
      await deleteEndpoint(store, ref, visibility("visibility", req.visibility));
      return {};
    },
  };
}

export function domainServiceImpl({
  store,
  settings,
  policy,
  verifyNow,
}: ExposureDeps): ServiceImpl<typeof DomainService> {
  return {
    async addDomain(req) {
      const { domain } = await addDomain(store, validateDomainRequest(req), settings, policy);
      return { domain: domainMsg(domain) };
    },
    async listDomains(req) {
      const { domains } = await listDomains(store.db, validateEnvironmentRef(req));
      return { domains: domains.map(domainMsg) };
    },
    async verifyDomain(req) {
      const d = await findDomain(store.db, validateDomainRequest(req));
      const checked = verifyNow ? ((await verifyNow(d.id)) ?? d) : d;
      return { domain: domainMsg(checked) };
    },
    async removeDomain(req) {
      await removeDomain(store, validateDomainRequest(req));
      return {};
    },
  };
}

// ---------------------------------------------------------------- status

function conditionMsg(c: StoredCondition): ReturnType<typeof create<typeof GatewayConditionSchema>> {
  return create(GatewayConditionSchema, c);
}

function routeMsg(s: StoredRouteStatus): GatewayRouteStatus {
  return create(GatewayRouteStatusSchema, {
    name: s.name,
    visibility: s.visibility,
    gateway: s.gateway,
    accepted: conditionMsg(s.accepted),
    resolvedRefs: conditionMsg(s.resolvedRefs),
    certificates: s.certificates.map((c) => ({
      hostname: c.hostname,
      secretName: c.secretName,
      ready: conditionMsg(c.ready),
      listener: c.listener ? conditionMsg(c.listener) : undefined,
    })),
    problem: s.problem,
  });
}

/** Pure: how ready one address is in one region, and why not, from its route's report. */
export function addressReadiness(
  route: StoredRouteStatus | undefined,
  rejected: string | null,
): { readiness: string; message: string } {
  if (rejected !== null) return { readiness: "rejected", message: `the region's agent refused it: ${rejected}` };
  if (!route) return { readiness: "unknown", message: "no report from the region's agent yet" };
  if (route.problem !== "") return { readiness: "rejected", message: route.problem };
  for (const [what, c] of [
    ["Accepted", route.accepted],
    ["ResolvedRefs", route.resolvedRefs],
  ] as const) {
    if (c.status === "False")
      return {
        readiness: "rejected",
        message: `Gateway ${route.gateway}: ${what}=False ${c.reason}${c.message ? `: ${c.message}` : ""}`,
      };
  }
  if (route.accepted.status !== "True" || route.resolvedRefs.status !== "True") {
    return { readiness: "pending", message: `waiting for Gateway ${route.gateway} to accept the route` };
  }
  for (const cert of route.certificates) {
    if (cert.ready.status !== "True") {
      const why =
        cert.ready.status === ""
          ? "not issued yet"
          : `${cert.ready.reason}${cert.ready.message ? `: ${cert.ready.message}` : ""}`;
      return { readiness: "pending", message: `certificate for ${cert.hostname}: ${why}` };
    }
    // Issued is not served: the environment's Gateway must have programmed the hostname's listener.
    const l = cert.listener;
    if (l && l.status !== "True") {
      const why =
        l.status === "" ? "not programmed by the Gateway yet" : `${l.reason}${l.message ? `: ${l.message}` : ""}`;
      return {
        readiness: l.status === "False" && l.reason === "NoListener" ? "rejected" : "pending",
        message: `HTTPS listener for ${cert.hostname}: ${why}`,
      };
    }
  }
  return { readiness: "ready", message: "" };
}

/** The endpoints and domains of an environment with their readiness per region. */
export async function exposureStatus(
  db: Kysely<Database>,
  environmentId: string,
  regions: readonly string[],
  settings: ExposureSettings,
): Promise<{ endpoints: EndpointStatus[]; domains: DomainStatus[] }> {
  const { endpoints, domains, reports: byRegion } = await exposureOf(db, environmentId);
  const perRegion = (routeName: string): AddressRegionStatus[] =>
    regions.map((region) => {
      const rep = byRegion.get(region);
      const route = rep?.routes.find((x) => x.name === routeName);
      const { readiness, message } = addressReadiness(route, rep?.rejected ?? null);
      return create(AddressRegionStatusSchema, {
        region,
        route: route ? routeMsg(route) : undefined,
        readiness,
        message,
      });
    });
  return {
    endpoints: endpoints.map((e) =>
      create(EndpointStatusSchema, { endpoint: endpointMsg(e, settings), regions: perRegion(e.visibility) }),
    ),
    domains: domains.map((d) =>
      create(DomainStatusSchema, {
        domain: domainMsg(d),
        regions: d.state === "verified" ? perRegion(domainRouteName(d.hostname)) : [],
      }),
    ),
  };
}
