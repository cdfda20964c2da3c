// `krane dev` (the README's run command) brings the whole system up on the embedded defaults,
// shows the example running, and stops everything on Ctrl-C. Where this machine can run real
// nodes (root, cgroups, network namespaces) it does with real containers, as `npm start` would;
// elsewhere with pod stand-ins — it prints which. With --tls the example is served over HTTPS
// through the local Gateway with its own certificate.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { dirname } from "node:path";
import type { TLSSocket } from "node:tls";
import { realNodeSupport } from "../../src/cluster/nodes/host.js";

const real = (await realNodeSupport()).ok;

function processesMentioning(text: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, "utf8");
      const state = readFileSync(`/proc/${entry}/stat`, "utf8");
      if (cmd.includes(text) && !/\) Z /.test(state)) pids.push(Number(entry));
    } catch {
      // gone
    }
  }
  return pids;
}

test("krane dev runs the example end to end and Ctrl-C leaves nothing running", { timeout: 10 * 60_000 }, async () => {
  const child = spawn(
    process.execPath,
    ["bin/krane.js", "dev", "--ctrl-port", "0", "--nodes", real ? "real" : "standins"],
    {
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  const ready = new Promise<void>((resolve, reject) => {
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
      if (stderr.includes("Ctrl-C stops everything")) resolve();
    });
    child.once("exit", (code) => reject(new Error(`krane dev exited early (${code}):\n${stderr}`)));
  });
  await ready;
  try {
    await checkRunning(
      child,
      () => stdout,
      () => stderr,
    );
  } catch (err) {
    child.kill("SIGKILL");
    throw err;
  }
});

async function checkRunning(child: ReturnType<typeof spawn>, out: () => string, err: () => string): Promise<void> {
  const stdout = out();
  const stderr = err();

  // It says how the pods run.
  assert.match(stderr, real ? /nodes: real nodes: the app runs under gVisor/ : /nodes: pod stand-ins/);
  // The status table shows the three replicas running with their addresses and a healthy
  // sentinel: one replica per zone on KWOK's three zones, all three on the one real untrusted node.
  const running = [...stdout.matchAll(/(\d+\.\d+\.\d+\.\d+:8080) running \((zone-[abc])\)/g)];
  assert.equal(running.length, 3, stdout);
  assert.deepEqual(
    new Set(running.map((m) => m[2])).size,
    real ? 1 : 3,
    real ? "all on the real node" : "one replica per zone",
  );
  // krane's own sentinel: its Service address, healthy, serving ctrl's routing version.
  assert.match(
    stdout,
    /snt-hello-production-\S+\s*│ local\s*│ snt-hello-production-\S+\.sentinel\.svc:8040\s*│ 1\s*│ 1\s*│ healthy\s*│ v1\s*│/,
  );
  const kubeconfig = /KUBECONFIG=(\S+)/.exec(stderr)?.[1];
  assert.ok(kubeconfig && existsSync(kubeconfig), "the local cluster's kubeconfig is shown");
  const clusterDir = dirname(kubeconfig);
  // Real nodes live in the network namespace of the cluster's slot S (the API server listens on 10.S.255.1).
  const slot = /server: https:\/\/10\.(\d+)\.255\.1:/.exec(readFileSync(kubeconfig, "utf8"))?.[1];
  const netns = real ? `krane-${slot ?? "?"}` : undefined;
  if (netns) assert.ok(existsSync(`/run/netns/${netns}`), `the real nodes' namespace ${netns}`);
  assert.ok(
    processesMentioning(clusterDir).length >= (real ? 9 : 5),
    real
      ? "etcd, apiserver, controller-manager, scheduler, KWOK, kube-proxy, CoreDNS, and two nodes' containerd and kubelet run"
      : "etcd, apiserver, controller-manager, scheduler and KWOK run",
  );

  // The hints work: the CLI, pointed at dev's ctrl with the printed URL and token, shows the same.
  const url = /KRANE_CTRL_URL=(\S+)/.exec(stderr)?.[1];
  const token = /KRANE_TOKEN=(\S+)/.exec(stderr)?.[1];
  assert.ok(url && token);
  assert.ok(stderr.includes(`the dashboard: ${url}/ `), `the dashboard's URL is printed:\n${stderr}`);
  const cli = spawnSync(process.execPath, ["bin/krane.js", "status", "hello/production", "--output", "json"], {
    env: { ...process.env, KRANE_CTRL_URL: url, KRANE_TOKEN: token },
    encoding: "utf8",
  });
  assert.equal(cli.status, 0, cli.stderr);
  const status = JSON.parse(cli.stdout) as { deployments: { regions: { instances: { status: string }[] }[] }[] };
  const statuses = status.deployments[0]?.regions[0]?.instances.map((i) => i.status);
  assert.deepEqual(statuses, ["INSTANCE_STATUS_RUNNING", "INSTANCE_STATUS_RUNNING", "INSTANCE_STATUS_RUNNING"]);

  // The printed curl line reaches the example through its sentinel, and every instance answers.
  const entry = /curl -s (http:\/\/\S+)/.exec(stderr)?.[1];
  assert.ok(entry, `a curl line is printed:\n${stderr}`);
  const answered = new Set<string>();
  for (let i = 0; i < 60 && answered.size < 3; i++) {
    const res = await fetch(entry, { signal: AbortSignal.timeout(10_000) });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { pod: string; image: string };
    assert.equal(body.image, "krane.local/hello:v1");
    answered.add(body.pod);
  }
  assert.equal(answered.size, 3, `all three instances answer: ${[...answered].join(", ")}`);

  const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  child.kill("SIGINT");
  assert.equal(await exit, 130);
  assert.match(err(), /stopped; nothing is left running/);
  assert.deepEqual(processesMentioning(clusterDir), [], "no cluster process is left");
  assert.equal(existsSync(clusterDir), false);
  if (netns) assert.equal(existsSync(`/run/netns/${netns}`), false, `the real nodes' namespace ${netns} is gone`);
}

test(
  "krane dev --tls serves the example over HTTPS with a certificate the printed local CA signed",
  { timeout: 10 * 60_000 },
  async () => {
    // Stand-ins are enough here: what --tls adds is the Gateway, cert-manager and the endpoint.
    // Traefik writes a listener's status (Programmed) before it applies the configuration that
    // serves its certificate, up to its throttle later (default 2 s). Widened here, the example
    // converges well inside that window, so a `krane dev` that printed the curl line on the
    // status alone would send clients to the Gateway's default certificate, as a fresh machine
    // (where the certificate was the last thing to become ready) once did.
    const child = spawn(process.execPath, ["bin/krane.js", "dev", "--ctrl-port", "0", "--nodes", "standins", "--tls"], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, KRANE_LOCAL_GATEWAY_THROTTLE: "15s" },
    });
    let stderr = "";
    const ready = new Promise<void>((resolve, reject) => {
      child.stderr.on("data", (d: Buffer) => {
        stderr += d.toString();
        if (stderr.includes("Ctrl-C stops everything")) resolve();
      });
      child.once("exit", (code) => reject(new Error(`krane dev --tls exited early (${code}):\n${stderr}`)));
    });
    child.stdout.resume();
    try {
      await ready;
      const line = /curl -s --cacert (\S+) (https:\/\/\S+)/.exec(stderr);
      assert.ok(line, `an HTTPS curl line is printed:\n${stderr}`);
      const [, caFile, url] = line;
      const { hostname, port } = new URL(url ?? "");
      assert.match(hostname, /\.localhost$/, "a generated hostname that resolves to this machine");
      // As curl does for *.localhost: connect to this machine, name the host (SNI and Host).
      const answer = await new Promise<{ status: number; subject: string; body: string }>((resolve, reject) => {
        const req = httpsRequest(
          {
            host: "127.0.0.1",
            port: Number(port),
            path: "/",
            servername: hostname,
            headers: { host: hostname },
            ca: readFileSync(caFile ?? "", "utf8"),
            agent: false,
            timeout: 10_000,
          },
          (res) => {
            const cert = (res.socket as TLSSocket).getPeerX509Certificate();
            let body = "";
            res.setEncoding("utf8");
            res.on("data", (c: string) => (body += c));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, subject: cert?.subjectAltName ?? "", body }));
          },
        );
        req.on("timeout", () => req.destroy(new Error("timeout")));
        req.on("error", reject);
        req.end();
      });
      assert.equal(answer.status, 200, answer.body);
      assert.equal(answer.subject, `DNS:${hostname}`, "the endpoint's own certificate, by SNI");
      assert.equal((JSON.parse(answer.body) as { image: string }).image, "krane.local/hello:v1");
    } finally {
      if (child.exitCode === null && child.signalCode === null) {
        const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
        child.kill("SIGINT");
        assert.equal(await exit, 130);
      }
    }
    assert.match(stderr, /stopped; nothing is left running/);
  },
);
