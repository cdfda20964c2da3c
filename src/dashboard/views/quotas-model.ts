// The quotas page's rows (pure): ctrl's GetQuota answer as people read it, each quota's use
// against its limit (the same words as `krane quota get`: src/contracts/quotas.ts quotaUse).
import type { Quota } from "../../gen/krane/ctrl/v1/quota_pb.js";
import { quotaUse, type QuotaUse } from "../../contracts/quotas.js";
import type { Tone } from "../components/badge.js";

export interface QuotaRow extends QuotaUse {
  /** Use as a share of the limit, in percent (rounded down); null when unlimited or not counted. */
  percent: number | null;
  /** What the state column says. */
  stateText: "over" | "full" | "within" | "unlimited" | "not counted";
}

export function quotaRows(quotas: readonly Quota[]): QuotaRow[] {
  return quotas.map((q) => {
    const u = quotaUse(q);
    const percent =
      q.limit === undefined || q.used === undefined
        ? null
        : q.limit === 0n
          ? q.used === 0n
            ? 100
            : Infinity
          : Number((q.used * 100n) / q.limit);
    const stateText =
      u.state !== "" ? u.state : q.used === undefined ? "not counted" : q.limit === undefined ? "unlimited" : "within";
    return { ...u, percent, stateText };
  });
}

const TONE: Record<QuotaRow["stateText"], Tone> = {
  over: "bad",
  full: "warn",
  within: "ok",
  unlimited: "muted",
  "not counted": "muted",
};

/** A quota's state's tone: over is bad, at the limit a warning (nothing more fits). */
export function quotaTone(r: QuotaRow): Tone {
  return TONE[r.stateText];
}

/** The share column: "75%", "-" without one, "over" past a limit of 0. */
export function percentText(r: QuotaRow): string {
  if (r.percent === null) return "-";
  return Number.isFinite(r.percent) ? `${r.percent}%` : "over";
}
