// Validation of configuration and secret changes (ConfigService). Keys are environment variable
// names (letters, digits, '_', not starting with a digit; PORT and KRANE_* are krane's); values
// are text: no NUL or other control characters but tab, LF and CR (binary data belongs in a
// file, not an environment variable). Limits, per request and per environment:
//   a key: 128 characters; a config value: 32 KiB; a secret value: 64 KiB;
//   keys per environment: 100 config + 100 secrets; all values of one kind: 256 KiB
//   (a ConfigMap or Secret holds at most 1 MiB).
// A secret's value never appears in an error message: errors name the field only.
import { invalidArgument } from "../errors.js";
import * as r from "./rules.js";

export const SETTINGS_LIMITS = {
  keysMax: 100,
  configValueMax: 32 * 1024,
  secretValueMax: 64 * 1024,
  totalMax: 256 * 1024,
  externalPathMax: 1024,
} as const;

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/;

export function settingValue(field: string, value: string, max: number): string {
  if (Buffer.byteLength(value, "utf8") > max) throw invalidArgument(field, `must be at most ${max / 1024} KiB`);
  if (CONTROL.test(value))
    throw invalidArgument(
      field,
      "must be text: no NUL or control characters other than tab and line breaks (binary data is not accepted)",
    );
  if (value.includes("\ufffd")) throw invalidArgument(field, "must be valid UTF-8 text (binary data is not accepted)");
  return value;
}

export function settingKeys(field: string, keys: readonly string[]): string[] {
  if (keys.length === 0) throw invalidArgument(field, "must name at least one key");
  r.list(field, keys, SETTINGS_LIMITS.keysMax);
  const seen = new Set<string>();
  return keys.map((k, i) => {
    const key = r.envName(`${field}[${i}]`, k);
    if (seen.has(key)) throw invalidArgument(`${field}[${i}]`, `repeats key "${key}"`);
    seen.add(key);
    return key;
  });
}

export interface ConfigValueInput {
  key: string;
  value: string;
}

export function validateConfigValues(values: readonly { key: string; value: string }[]): ConfigValueInput[] {
  if (values.length === 0) throw invalidArgument("values", "must set at least one key");
  r.list("values", values, SETTINGS_LIMITS.keysMax);
  const seen = new Set<string>();
  return values.map((v, i) => {
    const key = r.envName(`values[${i}].key`, v.key);
    if (seen.has(key)) throw invalidArgument(`values[${i}].key`, `repeats key "${key}"`);
    seen.add(key);
    return { key, value: settingValue(`values[${i}].value`, v.value, SETTINGS_LIMITS.configValueMax) };
  });
}

export type SecretInputValue =
  { key: string; source: "value"; value: string } | { key: string; source: "external"; path: string };

export function validateSecretInputs(
  secrets: readonly {
    key: string;
    source:
      | { case: "value"; value: string }
      | { case: "externalPath"; value: string }
      | { case: undefined; value?: undefined };
  }[],
): SecretInputValue[] {
  if (secrets.length === 0) throw invalidArgument("secrets", "must set at least one key");
  r.list("secrets", secrets, SETTINGS_LIMITS.keysMax);
  const seen = new Set<string>();
  return secrets.map((s, i) => {
    const key = r.envName(`secrets[${i}].key`, s.key);
    if (seen.has(key)) throw invalidArgument(`secrets[${i}].key`, `repeats key "${key}"`);
    seen.add(key);
    switch (s.source.case) {
      case "value":
        return {
          key,
          source: "value",
          value: settingValue(`secrets[${i}].value`, s.source.value, SETTINGS_LIMITS.secretValueMax),
        };
      case "externalPath": {
        const path = r.text(`secrets[${i}].external_path`, s.source.value, SETTINGS_LIMITS.externalPathMax, true);
        return { key, source: "external", path };
      }
      default:
        throw invalidArgument(`secrets[${i}]`, "needs a value or an external_path");
    }
  });
}
