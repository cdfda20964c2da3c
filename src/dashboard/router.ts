// The dashboard's addresses: hash routes, parsed and formatted here (pure), and `useRoute`, which
// follows the address bar. What a route names (an environment, an audit chain) is its key: the
// app mounts a page keyed by it, so another object is a fresh page. This module imports nothing
// of the pages, so every page may import it.
//
//   #/                                            the overview
//   #/env/<workspace>/<project>/<environment>[/<tab>]
//   #/audit                                       the first audit chain listed
//   #/audit/<workspace>, #/audit/*                a workspace's chain, the installation's
//   #/quotas[/<workspace>]                        a workspace's quotas (the first listed)
import { useEffect, useState } from "preact/hooks";

export interface EnvRef {
  workspace: string;
  project: string;
  environment: string;
}

/** An environment page's tabs, in the order shown, with their titles. */
export const ENV_TABS = [
  ["status", "Status"],
  ["events", "Events"],
  ["logs", "Logs"],
  ["requests", "Requests"],
  ["policies", "Policies"],
  ["charts", "Charts"],
  ["builds", "Builds"],
  ["config", "Config and domains"],
] as const;

export type EnvTab = (typeof ENV_TABS)[number][0];

export type Route =
  | { page: "overview" }
  | { page: "env"; env: EnvRef; tab: EnvTab }
  /** `chain`: a workspace's slug, "*" for the installation's, "" for the first listed. */
  | { page: "audit"; chain: string }
  /** `workspace`: a workspace's slug, "" for the first listed. */
  | { page: "quotas"; workspace: string }
  /** An address the dashboard has no page for: the overview is shown, no menu entry is current. */
  | { page: "unknown" };

function isTab(s: string | undefined): s is EnvTab {
  return ENV_TABS.some(([t]) => t === s);
}

/** The route of `hash` (location.hash, with or without its "#"). Unknown tabs are the status tab. */
export function parseRoute(hash: string): Route {
  let parts: string[];
  try {
    parts = hash
      .replace(/^#?\/?/, "")
      .split("/")
      .filter((p) => p !== "")
      .map(decodeURIComponent);
  } catch {
    // A malformed escape (%E0): no page of ours.
    return { page: "unknown" };
  }
  const [page, a, b, c, tab] = parts;
  if (page === undefined) return { page: "overview" };
  if (page === "env" && a && b && c) {
    return { page: "env", env: { workspace: a, project: b, environment: c }, tab: isTab(tab) ? tab : "status" };
  }
  if (page === "audit") return { page: "audit", chain: a ?? "" };
  if (page === "quotas") return { page: "quotas", workspace: a ?? "" };
  return { page: "unknown" };
}

function segments(parts: readonly string[]): string {
  return parts.map(encodeURIComponent).join("/");
}

/** The address of an environment's page; without `tab`, its first (the status tab). */
export function envHash(ref: EnvRef, tab?: EnvTab): string {
  const env = `#/env/${segments([ref.workspace, ref.project, ref.environment])}`;
  return tab === undefined ? env : `${env}/${tab}`;
}

/** The address of `route`: parseRoute(formatRoute(r)) is r. */
export function formatRoute(route: Route): string {
  switch (route.page) {
    case "env":
      return envHash(route.env, route.tab);
    case "audit":
      return route.chain === "" ? "#/audit" : `#/audit/${segments([route.chain])}`;
    case "quotas":
      return route.workspace === "" ? "#/quotas" : `#/quotas/${segments([route.workspace])}`;
    default:
      return "#/";
  }
}

/** What identifies an environment's page: a new key, a new page. */
export function envKey(ref: EnvRef): string {
  return JSON.stringify([ref.workspace, ref.project, ref.environment]);
}

/**
 * The object a route's page shows: the app mounts the page keyed by it, so another object is a
 * fresh page with none of the last one's state (a tab of the same environment is the same page).
 */
export function routeKey(route: Route): string {
  switch (route.page) {
    case "env":
      return `env ${envKey(route.env)}`;
    case "audit":
      return `audit ${route.chain}`;
    case "quotas":
      return `quotas ${route.workspace}`;
    default:
      // An unknown address shows the overview: the same page.
      return "overview";
  }
}

/** The route of the address bar, following its changes. */
export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseRoute(location.hash));
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  return route;
}
