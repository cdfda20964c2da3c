// The requests and policies tabs' pure part: a StreamRequests entry as a row of the requests
// table (the newest KEEP_REQUESTS kept), and the request a filled policy form makes (ctrl
// validates it and names the field it refuses).
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { EdgePolicySchema } from "../../../gen/krane/ctrl/v1/exposure_pb.js";
import { LogMarkerKind, type LogEntry } from "../../../gen/krane/ctrl/v1/logs_pb.js";
import { closedAfter } from "../../../contracts/request-view.js";

/** Requests kept in the page (the newest). */
export const KEEP_REQUESTS = 500;

export interface RequestRow {
  /** The row's number in the page: its key. */
  n: number;
  /** UTC, to the millisecond. */
  time: string;
  region: string;
  method: string;
  /** "" for a marker (requests not shown, a region that did not answer). */
  status: string;
  latency: string;
  path: string;
  /** The revision and instance that answered, the policy that refused it, or the sentinel itself. */
  by: string;
  client: string;
  key: string;
}

/** A StreamRequests entry as a row (a marker's message goes in the path column). */
export function requestRow(e: LogEntry, n: number): RequestRow {
  const base = {
    n,
    time: new Date(Number(e.timeUnixNano / 1_000_000n)).toISOString().slice(11, 23),
    region: e.region,
  };
  if (e.entry.case !== "request") {
    const m = e.entry.case === "marker" ? e.entry.value : undefined;
    const text = m === undefined ? "" : m.kind === LogMarkerKind.DROPPED ? `${m.dropped} ${m.message}` : m.message;
    return { ...base, method: "", status: "", latency: "", path: text, by: "", client: "", key: "" };
  }
  const r = e.entry.value;
  return {
    ...base,
    method: r.method,
    status: r.status === 0 ? "cut short" : String(r.status),
    latency: `${r.latencyMs < 10 ? r.latencyMs.toFixed(1) : Math.round(r.latencyMs)} ms`,
    path: r.path,
    by:
      (r.policy !== ""
        ? `refused by ${r.policy}`
        : e.revision > 0n
          ? `r${e.revision} ${e.instance}`
          : e.instance || "sentinel") + closedAfter(r.openMs),
    client: r.client,
    key: r.key,
  };
}

export const POLICY_KINDS = ["ip", "limits", "ratelimit", "apikey"] as const;

/** What the policy form holds, as typed (lists comma- or space-separated). */
export interface PolicyForm {
  name: string;
  kind: string;
  /** ip: CIDRs. */
  allow: string;
  deny: string;
  /** limits. */
  methods: string;
  pathPrefixes: string;
  /** ratelimit: "address", "header", "jwt" or "apikey". */
  per: string;
  /** ratelimit per header, apikey: the header. */
  header: string;
  limit: string;
  windowSeconds: string;
}

export const EMPTY_POLICY_FORM: PolicyForm = {
  name: "",
  kind: "ip",
  allow: "",
  deny: "",
  methods: "",
  pathPrefixes: "",
  per: "address",
  header: "",
  limit: "",
  windowSeconds: "60",
};

function list(text: string): string[] {
  return text.split(/[\s,]+/).filter((s) => s !== "");
}

/** The EdgePolicy a filled form asks for (its fields as typed: ctrl refuses what is wrong, naming it). */
export function policyRequest(f: PolicyForm): MessageInitShape<typeof EdgePolicySchema> {
  const name = f.name.trim();
  switch (f.kind) {
    case "limits":
      return {
        name,
        kind: { case: "limits", value: { methods: list(f.methods), pathPrefixes: list(f.pathPrefixes) } },
      };
    case "ratelimit":
      return {
        name,
        kind: {
          case: "rateLimit",
          value: {
            key: f.per,
            header: f.header.trim(),
            limit: BigInt(Math.trunc(Number(f.limit) || 0)),
            windowSeconds: BigInt(Math.trunc(Number(f.windowSeconds) || 0)),
          },
        },
      };
    case "apikey":
      return { name, kind: { case: "apiKey", value: { header: f.header.trim() } } };
    default:
      return { name, kind: { case: "ip", value: { allow: list(f.allow), deny: list(f.deny) } } };
  }
}
