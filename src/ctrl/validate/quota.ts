// SetQuota's values: by quota name, each as `krane quota set` writes it (src/contracts/quotas.ts).
import {
  isQuotaName,
  parseQuotaValue,
  QUOTA_NAMES,
  type QuotaName,
  type QuotaSetting,
} from "../../contracts/quotas.js";
import { invalidArgument } from "../errors.js";

export function validateQuotaValues(
  field: string,
  values: Readonly<Record<string, string>>,
): Map<QuotaName, QuotaSetting> {
  const out = new Map<QuotaName, QuotaSetting>();
  const names = Object.keys(values).sort();
  if (names.length === 0) throw invalidArgument(field, `name at least one quota (${QUOTA_NAMES.join(", ")})`);
  for (const name of names) {
    if (!isQuotaName(name)) throw invalidArgument(`${field}.${name}`, `is not a quota (${QUOTA_NAMES.join(", ")})`);
    try {
      out.set(name, parseQuotaValue(name, values[name] ?? ""));
    } catch (err) {
      throw invalidArgument(`${field}.${name}`, (err as Error).message.replace(`${name}: `, ""));
    }
  }
  return out;
}
