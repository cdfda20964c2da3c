// Kubernetes quantities ("500m", "128Mi", "123456789n") as numbers: what drift detection compares
// and what the agent reads of limits and of the metrics API's usage figures.

const suffixes: Record<string, number> = {
  "": 1,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** A Kubernetes quantity as a number of base units (in thousandths, rounded), or undefined. */
export function parseQuantity(q: string): number | undefined {
  const m = /^([+-]?[0-9]+(?:\.[0-9]+)?)(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/.exec(q);
  if (!m) return undefined;
  const n = Number(m[1]);
  const mult = suffixes[m[2] ?? ""];
  if (mult === undefined || !Number.isFinite(n)) return undefined;
  return Math.round(n * mult * 1000);
}
