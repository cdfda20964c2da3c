import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  appMarks,
  containerdMarks,
  parseCtrEvent,
  parseRunscLine,
  phaseTable,
  POSTED,
  runscLogCommand,
  runscMarks,
  withRunscOptions,
  type RunscLog,
} from "../../../bench/autoscale/node-trace.js";

const T0 = Date.parse("2026-11-29T22:10:11Z");

describe("cold-start trace: containerd events", () => {
  it("reads a ctr events line's time to the sub-millisecond, its topic and its container", () => {
    const e = parseCtrEvent(
      '2026-11-29 22:10:11.123456789 +0000 UTC k8s.io /tasks/create {"container_id":"abc","bundle":"/x","pid":42}',
    );
    assert.deepEqual(e, { at: T0 + 123.456789, namespace: "k8s.io", topic: "/tasks/create", id: "abc" });
  });

  it("takes the zone's offset and a whole second, and `id` when there is no container_id", () => {
    const e = parseCtrEvent('2026-11-29 23:10:11 +0100 CET k8s.io /containers/create {"id":"sb","image":"pause"}');
    assert.equal(e?.at, T0);
    assert.equal(e?.id, "sb");
  });

  it("keeps an event whose body is not JSON, and skips other lines", () => {
    assert.equal(parseCtrEvent("2026-11-29 22:10:11.5 +0000 UTC k8s.io /snapshot/prepare {oops")?.id, undefined);
    assert.equal(parseCtrEvent("ctr: failed to dial"), undefined);
    assert.equal(parseCtrEvent(""), undefined);
  });

  it("marks the sandbox and the app container apart, first event of each kind only", () => {
    const ev = (ms: number, topic: string, id: string) => ({ at: T0 + ms, namespace: "k8s.io", topic, id });
    const m = containerdMarks(
      [
        ev(1, "/snapshot/prepare", "x"),
        ev(10, "/containers/create", "sb"),
        ev(20, "/tasks/create", "sb"),
        ev(30, "/tasks/start", "sb"),
        ev(40, "/containers/create", "app"),
        ev(50, "/tasks/create", "app"),
        ev(60, "/tasks/start", "app"),
        ev(70, "/tasks/start", "app"),
        ev(80, "/tasks/exit", "app"),
      ],
      "app",
    );
    assert.deepEqual(
      [...m].map(([k, v]) => [k, v - T0]),
      [
        ["sandbox container created", 10],
        ["sandbox task created", 20],
        ["sandbox task started", 30],
        ["app container created", 40],
        ["app task created", 50],
        ["app task started", 60],
      ],
    );
  });
});

describe("cold-start trace: runsc debug logs", () => {
  it("reads glog's line with the year given, and skips continuation lines", () => {
    assert.deepEqual(parseRunscLine("I1129 22:10:11.165890       1 loader.go:532] CPUs: 2", 2026), {
      at: T0 + 165.89,
      level: "I",
      msg: "CPUs: 2",
    });
    assert.equal(parseRunscLine('  "ociVersion": "",', 2026), undefined);
  });

  it("names a log file's command", () => {
    assert.equal(runscLogCommand("runsc.log.20261129-215533.122545.boot.txt"), "boot");
    assert.equal(runscLogCommand("runsc.log.20261129-215533.122545.gofer.txt"), "gofer");
    assert.equal(runscLogCommand("notes.txt"), undefined);
  });

  it("finds the sandbox's boot, seccomp and the app's steps among the commands' logs, in any order", () => {
    const l = (ms: number, msg: string) => ({ at: T0 + ms, level: "I", msg });
    const sandbox: RunscLog[] = [
      { command: "create", lines: [l(0, "**************** gVisor ****************")] },
      { command: "gofer", lines: [l(5, "**************** gVisor ****************")] },
      {
        command: "boot",
        lines: [
          l(6, "**************** gVisor ****************"),
          l(6, "**************** gVisor ****************"),
          l(7, 'Execve "/proc/self/exe" again, bye!'),
          l(30, "**************** gVisor ****************"),
          l(40, "Watchdog waiting 30s for startup"),
          l(45, "Setting routes [127.0.0.0/8 nic 1 ::1/128 nic 1]"),
          l(50, "Installing seccomp filters for 97 syscalls (action=[default])"),
          l(60, "Seccomp filters installed."),
          l(70, 'EXEC: []string{"/pause"}'),
          l(200, 'EXEC: []string{"node", "/app/hello.js"}'),
        ],
      },
    ];
    // The app's commands come second, whichever directory the shim put them in.
    const app: RunscLog[] = [
      { command: "start", lines: [l(190, "start")] },
      { command: "gofer", lines: [l(160, "gofer")] },
      { command: "create", lines: [l(150, "create")] },
      { command: "start", lines: [] },
    ];
    const sandboxStart: RunscLog = { command: "start", lines: [l(80, "start")] };
    const marks = runscMarks([...app, sandboxStart, ...sandbox]);
    assert.deepEqual(Object.fromEntries([...marks].map(([k, v]) => [k, v - T0])), {
      "runsc create (sandbox)": 0,
      "gofer running (sandbox)": 5,
      "sentry booting": 6,
      "sentry re-executed": 30,
      "sentry kernel created": 40,
      "sandbox network set up": 45,
      "seccomp compiling": 50,
      "seccomp installed": 60,
      "runsc create (app)": 150,
      "gofer running (app)": 160,
      "runsc start (app)": 190,
      "app exec in the sentry": 200,
    });
  });

  it("sets runsc flags in runsc.toml's table, replacing a key rather than repeating it", () => {
    const toml = 'binary_name = "/r"\n\n[runsc_config]\n  platform = "systrap"\n';
    assert.equal(
      withRunscOptions(toml, { platform: "ptrace", debug: "true" }),
      'binary_name = "/r"\n\n[runsc_config]\n  platform = "ptrace"\n  debug = "true"\n',
    );
    assert.equal(withRunscOptions(toml, {}), toml);
    assert.throws(() => withRunscOptions('binary_name = "/r"\n', { debug: "true" }), /runsc_config/);
  });
});

describe("cold-start trace: the app and the table", () => {
  it("reads the hello app's listening line: when it listened and when its process started", () => {
    const log = [
      "not json",
      JSON.stringify({ time: "2026-11-29T22:10:12.000Z", msg: "other" }),
      JSON.stringify({ time: "2026-11-29T22:10:12.500Z", msg: "hello listening", started: "2026-11-29T22:10:12.100Z" }),
    ].join("\n");
    assert.deepEqual(Object.fromEntries(appMarks(log)), {
      "app process started": T0 + 1100,
      "app listening": T0 + 1500,
    });
    assert.equal(appMarks("").size, 0);
  });

  it("orders the marks every run reached by their median time and splits the total into steps", () => {
    const run = (entries: [string, number][]) => new Map(entries.map(([k, v]) => [k, T0 + v]));
    const rows = phaseTable([
      run([
        [POSTED, 0],
        ["b", 300],
        ["a", 100],
        ["only here", 50],
      ]),
      run([
        [POSTED, 0],
        ["a", 200],
        ["b", 250],
      ]),
    ]);
    assert.deepEqual(
      rows.map((r) => [r.step, r.ms, r.fromStart]),
      [
        [`${POSTED} → a`, [100, 200], [100, 200]],
        ["a → b", [200, 50], [300, 250]],
      ],
    );
    assert.deepEqual(phaseTable([]), []);
    assert.deepEqual(phaseTable([run([["a", 1]])]), []);
  });
});
