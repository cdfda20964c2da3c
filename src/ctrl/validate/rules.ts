// Primitive validation rules. Each check throws DomainError("invalid_argument") naming the
// request field at fault (e.g. `env[2].name`), and never echoes a value that might be a secret.
import { REGION_REPLICAS_MAX } from "../../contracts/autoscaling.js";
import { invalidArgument } from "../errors.js";

/** A pod's name (a DNS subdomain: at most 253 characters). */
export const POD_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

export const LIMITS = {
  slugMax: 40,
  nameMax: 100,
  imageMax: 512,
  listMax: 64,
  argMax: 4096,
  envMax: 100,
  envNameMax: 128,
  envValueMax: 32 * 1024,
  envTotalMax: 256 * 1024,
  regionsMax: 20,
  replicasMax: REGION_REPLICAS_MAX,
  cpuMin: 10,
  cpuMax: 64_000,
  memoryMin: 16,
  memoryMax: 262_144,
  pathMax: 1024,
  idMax: 64,
  reasonMax: 4096,
  instancesMax: 5000,
  shortTextMax: 256,
} as const;

const DNS_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

/** A slug: a DNS-1035 label (lowercase letters, digits, '-'; starts with a letter) of <= 40 chars. */
export function slug(field: string, value: string): string {
  if (value === "") throw invalidArgument(field, "is required");
  if (value.length > LIMITS.slugMax) throw invalidArgument(field, `must be at most ${LIMITS.slugMax} characters`);
  if (!DNS_LABEL.test(value)) {
    throw invalidArgument(field, "must be lowercase letters, digits and '-', start with a letter and not end with '-'");
  }
  return value;
}

/** A reference to an object by slug or id (`prefix_…`). */
export function ref(field: string, value: string, idPrefix: string): string {
  if (value === "") throw invalidArgument(field, "is required");
  if (value.startsWith(`${idPrefix}_`)) return id(field, value, idPrefix);
  return slug(field, value);
}

export function id(field: string, value: string, prefix: string): string {
  if (value === "") throw invalidArgument(field, "is required");
  if (value.length > LIMITS.idMax || !new RegExp(`^${prefix}_[a-z0-9]{1,60}$`).test(value)) {
    throw invalidArgument(field, `must be an id of the form ${prefix}_…`);
  }
  return value;
}

/** Free text: printable, no control characters, bounded. */
export function text(field: string, value: string, max: number, required = false): string {
  if (required && value === "") throw invalidArgument(field, "is required");
  if (value.length > max) throw invalidArgument(field, `must be at most ${max} characters`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value)) throw invalidArgument(field, "must not contain control characters");
  return value;
}

/** Arguments may hold anything but NUL (which no exec can pass). */
export function arg(field: string, value: string): string {
  if (value.length > LIMITS.argMax) throw invalidArgument(field, `must be at most ${LIMITS.argMax} characters`);
  if (value.includes("\u0000")) throw invalidArgument(field, "must not contain NUL");
  return value;
}

// registry[:port]/path[:tag][@digest], following the shape of the distribution reference grammar.
const IMAGE_REF =
  /^(?:(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?))*(?::[0-9]+)?\/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$/;

export function image(field: string, value: string): string {
  if (value === "") throw invalidArgument(field, "is required");
  if (value.length > LIMITS.imageMax) throw invalidArgument(field, `must be at most ${LIMITS.imageMax} characters`);
  if (!IMAGE_REF.test(value))
    throw invalidArgument(field, "must be an image reference such as registry.example.com/team/app:1.2");
  return value;
}

/** The name of a known enum value (`names[value]`), or invalid_argument naming the field. */
export function enumName<N extends string>(
  field: string,
  value: number,
  names: Readonly<Record<number, N>>,
  what: string,
): N {
  const n = names[value];
  if (n === undefined) throw invalidArgument(field, `is not a known ${what}`);
  return n;
}

export function intRange(field: string, value: number | bigint, min: number, max: number): number {
  const n = typeof value === "bigint" ? Number(value) : value;
  if (!Number.isInteger(n) || n < min || n > max) throw invalidArgument(field, `must be between ${min} and ${max}`);
  return n;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Names the platform sets itself and users may not override. */
export function reservedEnvName(name: string): boolean {
  return name === "PORT" || name.startsWith("KRANE_");
}

export function envName(field: string, value: string): string {
  if (value === "") throw invalidArgument(field, "is required");
  if (value.length > LIMITS.envNameMax) throw invalidArgument(field, `must be at most ${LIMITS.envNameMax} characters`);
  if (!ENV_NAME.test(value)) throw invalidArgument(field, "must be letters, digits and '_' and not start with a digit");
  if (reservedEnvName(value)) throw invalidArgument(field, "is reserved by krane (PORT, KRANE_*)");
  return value;
}

/** "25%" or "1": Kubernetes' int-or-percent for maxSurge / maxUnavailable. */
export function intOrPercent(field: string, value: string): string {
  const m = /^(\d{1,6})(%?)$/.exec(value);
  if (!m) throw invalidArgument(field, 'must be an integer ("1") or a percentage ("25%")');
  const n = Number(m[1]);
  if (m[2] === "%" && n > 100) throw invalidArgument(field, "must be at most 100%");
  return `${n}${m[2]}`;
}

export function isZeroIntOrPercent(value: string): boolean {
  return value === "0" || value === "0%";
}

export function list<T>(field: string, values: readonly T[], max: number): readonly T[] {
  if (values.length > max) throw invalidArgument(field, `must have at most ${max} entries`);
  return values;
}

export function requiredWith(field: string, other: string): Error {
  return invalidArgument(field, `is required when ${other} is given`);
}
