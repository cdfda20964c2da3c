// Where a cold start's time goes below Kubernetes (bench/autoscale/node-phases.ts), as pure
// functions: containerd's event stream (`ctr events`), gVisor's debug log lines (`runsc --debug`),
// the hello app's log line, and the phase table built from the marks of several starts. Every
// mark is a wall-clock time in epoch milliseconds, so marks from the bench, containerd, runsc and
// the app (all on this machine's clock) can be put on one line.
import { isRecord } from "../../src/kube/object.js";
import { pct } from "../support.js";

/** One line of `ctr events`: when, the namespace, the topic and the object it names. */
export interface ContainerdEvent {
  readonly at: number;
  readonly namespace: string;
  readonly topic: string;
  /** The container (or sandbox) the event is about: `container_id`, else `id`. */
  readonly id: string | undefined;
}

// `2026-11-29 22:10:11.123456789 +0000 UTC k8s.io /tasks/create {"container_id":"…",…}` (Go's
// time.Time String(), then the namespace, the topic and the event as JSON).
const CTR_EVENT = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(\.\d+)? ([+-])(\d{2})(\d{2}) \S+ (\S+) (\/\S+)(?: (.*))?$/;

/** Milliseconds from an ISO date, a time, a fraction of a second (".123456789" or "") and a UTC offset. */
function epochMs(date: string, time: string, fraction: string, sign: string, oh: string, om: string): number {
  const base = Date.parse(`${date}T${time}Z`);
  const offset = (Number(oh) * 60 + Number(om)) * 60_000 * (sign === "-" ? -1 : 1);
  return base - offset + (fraction === "" ? 0 : Number(`0${fraction}`) * 1000);
}

/** Pure: one `ctr events` line, or undefined for anything else. */
export function parseCtrEvent(line: string): ContainerdEvent | undefined {
  const m = CTR_EVENT.exec(line.trim());
  if (!m) return undefined;
  const [, date = "", time = "", fraction = "", sign = "+", oh = "0", om = "0", namespace = "", topic = ""] = m;
  let id: string | undefined;
  try {
    const body: unknown = m[9] ? JSON.parse(m[9]) : undefined;
    if (isRecord(body)) {
      const v = body.container_id ?? body.id;
      id = typeof v === "string" ? v : undefined;
    }
  } catch {
    // An event whose body is not JSON still has its time and topic.
  }
  return { at: epochMs(date, time, fraction, sign, oh, om), namespace, topic, id };
}

/** One line of a runsc debug log (glog's format: `I1129 21:55:33.165890   1 file.go:283] message`). */
export interface RunscLine {
  readonly at: number;
  readonly level: string;
  readonly msg: string;
}

const RUNSC_LINE = /^([DIWEF])(\d{2})(\d{2}) (\d{2}:\d{2}:\d{2})(\.\d+)\s+\d+ \S+:\d+\] (.*)$/;

/**
 * Pure: one runsc log line, or undefined (continuation lines of a multi-line message). glog writes
 * no year and the time in the process's zone: runsc under containerd runs with no TZ, so UTC;
 * `year` is the year of the run.
 */
export function parseRunscLine(line: string, year: number): RunscLine | undefined {
  const m = RUNSC_LINE.exec(line);
  if (!m) return undefined;
  const [, level = "", month = "", day = "", time = "", fraction = "", msg = ""] = m;
  return { at: epochMs(`${year}-${month}-${day}`, time, fraction, "+", "00", "00"), level, msg };
}

/** The log of one runsc command, named by runsc's default file name `runsc.log.<stamp>.<command>.txt`. */
export interface RunscLog {
  readonly command: string;
  readonly lines: readonly RunscLine[];
}

/** Pure: the command of a runsc debug log file name ("boot", "gofer", "create", …), or undefined. */
export function runscLogCommand(fileName: string): string | undefined {
  return /^runsc\.log\.\d{8}-\d{6}\.\d+\.([a-z-]+)\.txt$/.exec(fileName)?.[1];
}

/**
 * Pure: gVisor's own steps of one pod from the runsc logs of its sandbox and its app container,
 * wherever the shim put them (its `%ID%` may name either container). Each runsc command of the
 * pause container comes before the app container's: the first `create`, `gofer` and `start` are
 * the sandbox's, the second ones the app's. The sentry's boot log also says when the app's process
 * was executed inside the sandbox.
 */
export function runscMarks(logs: readonly RunscLog[]): Map<string, number> {
  const out = new Map<string, number>();
  const byTime = [...logs]
    .filter((l) => l.lines.length > 0)
    .sort((a, b) => (a.lines[0]?.at ?? 0) - (b.lines[0]?.at ?? 0));
  const nth = (command: string, n: number): RunscLine | undefined =>
    byTime.filter((l) => l.command === command)[n]?.lines[0];
  const find = (command: string, test: (msg: string) => boolean): RunscLine | undefined => {
    for (const l of byTime) if (l.command === command) for (const x of l.lines) if (test(x.msg)) return x;
    return undefined;
  };
  const set = (mark: string, l: RunscLine | undefined): void => {
    if (l && !out.has(mark)) out.set(mark, l.at);
  };
  set("runsc create (sandbox)", nth("create", 0));
  set("gofer running (sandbox)", nth("gofer", 0));
  set("sentry booting", nth("boot", 0));
  // The sentry re-executes itself once set up (chroot, capabilities): the line after it said so.
  const boot = byTime.find((l) => l.command === "boot")?.lines ?? [];
  set("sentry re-executed", boot[boot.findIndex((x) => x.msg.startsWith("Execve")) + 1]);
  // Then the loader (platform, memory, the kernel), the sandbox's network stack and its seccomp
  // filters (compiled at boot when runsc has no precompiled program for its configuration).
  set(
    "sentry kernel created",
    find("boot", (m) => m.startsWith("Watchdog waiting")),
  );
  set(
    "sandbox network set up",
    find("boot", (m) => m.startsWith("Setting routes")),
  );
  set(
    "seccomp compiling",
    find("boot", (m) => m.startsWith("Installing seccomp filters")),
  );
  set(
    "seccomp installed",
    find("boot", (m) => m.startsWith("Seccomp filters installed")),
  );
  set("runsc create (app)", nth("create", 1));
  set("gofer running (app)", nth("gofer", 1));
  set("runsc start (app)", nth("start", 1));
  // "EXEC: []string{"/pause"}" is the sandbox's own process; the app's is the next one.
  set(
    "app exec in the sentry",
    find("boot", (m) => m.startsWith("EXEC:") && !m.includes("/pause")),
  );
  return out;
}

/** Pure: the time the hello app logged (its JSON line) `msg`, and when its process started. */
export function appMarks(log: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of log.split("\n")) {
    let o: unknown;
    try {
      o = JSON.parse(line);
    } catch {
      continue;
    }
    if (!isRecord(o) || o.msg !== "hello listening") continue;
    if (typeof o.started === "string") out.set("app process started", Date.parse(o.started));
    if (typeof o.time === "string") out.set("app listening", Date.parse(o.time));
    break;
  }
  return out;
}

/**
 * Pure: containerd's marks of one pod from the events seen while it started: its sandbox's and
 * its app container's create, task create and task start. `appId` is the app container's id (the
 * pod's status names it); the sandbox is the other container created in the window.
 */
export function containerdMarks(events: readonly ContainerdEvent[], appId: string): Map<string, number> {
  const out = new Map<string, number>();
  const sandboxId = sandboxIdOf(events, appId);
  const names: Record<string, string> = {
    "/containers/create": "container created",
    "/tasks/create": "task created",
    "/tasks/start": "task started",
  };
  for (const e of events) {
    const what = names[e.topic];
    if (!what || e.id === undefined) continue;
    const mark = e.id === appId ? `app ${what}` : e.id === sandboxId ? `sandbox ${what}` : undefined;
    if (mark && !out.has(mark)) out.set(mark, e.at);
  }
  return out;
}

/** The sandbox container's id in the marks' window (see containerdMarks), for finding its runsc logs. */
export function sandboxIdOf(events: readonly ContainerdEvent[], appId: string): string | undefined {
  return events.find((e) => e.topic === "/containers/create" && e.id !== undefined && e.id !== appId)?.id;
}

/** Where every run starts: the bench's POST of the pod. */
export const POSTED = "pod posted";

export interface PhaseRow {
  /** "a → b": the step from the previous mark reached to this one. */
  readonly step: string;
  /** Every run's step duration, ms. */
  readonly ms: readonly number[];
  /** Every run's time from the POST to this one, ms. */
  readonly fromStart: readonly number[];
}

/**
 * Pure: the phase table of several starts of one kind. The rows are the marks reached in every
 * run, in the order of their median time since the POST, each with the time since the previous
 * one; marks missing from any run are left out, so every row covers the same runs and the steps
 * add up to the total. (The sources' order is not fixed: runsc's gofer and the sentry's boot
 * overlap, and a step may come out negative when two marks are a clock's jitter apart.)
 */
export function phaseTable(runs: readonly ReadonlyMap<string, number>[]): PhaseRow[] {
  if (runs.length === 0 || !runs.every((r) => r.has(POSTED))) return [];
  const since = (r: ReadonlyMap<string, number>, m: string): number => (r.get(m) ?? NaN) - (r.get(POSTED) ?? NaN);
  const common = [...(runs[0]?.keys() ?? [])].filter((m) => runs.every((r) => r.has(m)));
  const median = (m: string): number =>
    pct(
      [...runs.map((r) => since(r, m))].sort((a, b) => a - b),
      50,
    );
  const order = common.sort((a, b) => median(a) - median(b) || (a === POSTED ? -1 : b === POSTED ? 1 : 0));
  const rows: PhaseRow[] = [];
  for (let i = 1; i < order.length; i++) {
    const from = order[i - 1] ?? "";
    const to = order[i] ?? "";
    rows.push({
      step: `${from} → ${to}`,
      ms: runs.map((r) => (r.get(to) ?? NaN) - (r.get(from) ?? NaN)),
      fromStart: runs.map((r) => since(r, to)),
    });
  }
  return rows;
}

/** Pure: "p50 0.12 s, p99 0.34 s" of milliseconds. */
export function p50p99(ms: readonly number[]): string {
  const s = [...ms].sort((a, b) => a - b);
  return `p50 ${(pct(s, 50) / 1000).toFixed(2)} s, p99 ${(pct(s, 99) / 1000).toFixed(2)} s`;
}

/**
 * Pure: gVisor's shim configuration (runsc.toml, src/cluster/nodes/config.ts) with `options` set
 * in its `[runsc_config]` table (runsc's flags, which must stay unique keys): each replaces the
 * key's line when there is one, or is added at the table's end.
 */
export function withRunscOptions(toml: string, options: Readonly<Record<string, string>>): string {
  const lines = toml.replace(/\n+$/, "").split("\n");
  const table = lines.findIndex((l) => l.trim() === "[runsc_config]");
  if (table < 0) throw new Error("runsc.toml has no [runsc_config] table");
  let end = lines.findIndex((l, i) => i > table && /^\s*\[/.test(l));
  if (end < 0) end = lines.length;
  for (const [key, value] of Object.entries(options)) {
    const line = `  ${key} = ${JSON.stringify(value)}`;
    const at = lines.findIndex((l, i) => i > table && i < end && l.trim().startsWith(`${key} =`));
    if (at >= 0) lines[at] = line;
    else lines.splice(end++, 0, line);
  }
  return `${lines.join("\n")}\n`;
}
