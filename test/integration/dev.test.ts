// `krane dev` (the README's run command) brings the whole system up on the embedded defaults,
// shows the example running, and stops everything on Ctrl-C.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname } from "node:path";

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
  const child = spawn(process.execPath, ["bin/krane.js", "dev", "--ctrl-port", "0"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
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

  // The status table shows the three replicas running with addresses in three zones, and a healthy sentinel.
  const running = [...stdout.matchAll(/(\d+\.\d+\.\d+\.\d+:8080) running \((zone-[abc])\)/g)];
  assert.equal(running.length, 3, stdout);
  assert.deepEqual(new Set(running.map((m) => m[2])).size, 3, "one replica per zone");
  // krane's own sentinel: its Service address, healthy, serving ctrl's routing version.
  assert.match(
    stdout,
    /snt-hello-production-\S+\s*│ local\s*│ snt-hello-production-\S+\.sentinel\.svc:8040\s*│ 1\s*│ 1\s*│ healthy\s*│ v1\s*│/,
  );
  const kubeconfig = /KUBECONFIG=(\S+)/.exec(stderr)?.[1];
  assert.ok(kubeconfig && existsSync(kubeconfig), "the local cluster's kubeconfig is shown");
  const clusterDir = dirname(kubeconfig);
  assert.ok(processesMentioning(clusterDir).length >= 5, "etcd, apiserver, controller-manager, scheduler and KWOK run");

  // The hints work: the CLI, pointed at dev's ctrl with the printed URL and token, shows the same.
  const url = /KRANE_CTRL_URL=(\S+)/.exec(stderr)?.[1];
  const token = /KRANE_TOKEN=(\S+)/.exec(stderr)?.[1];
  assert.ok(url && token);
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
    assert.equal(body.image, "registry.example.com/hello:1.0.0");
    answered.add(body.pod);
  }
  assert.equal(answered.size, 3, `all three instances answer: ${[...answered].join(", ")}`);

  const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  child.kill("SIGINT");
  assert.equal(await exit, 130);
  assert.match(err(), /stopped; nothing is left running/);
  assert.deepEqual(processesMentioning(clusterDir), [], "no cluster process is left");
  assert.equal(existsSync(clusterDir), false);
}
