// Module hooks for record-imports.mjs: they run on the loader thread and record every URL
// resolved or loaded (tsx may answer a load itself, so resolve is recorded too).
import { appendFileSync } from "node:fs";
import process from "node:process";

function record(url) {
  if (process.env.RECORD_IMPORTS) appendFileSync(process.env.RECORD_IMPORTS, `${url}\n`);
}

export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  record(result.url);
  return result;
}

export async function load(url, context, next) {
  record(url);
  return next(url, context);
}
