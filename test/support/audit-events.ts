// A chain of audit events written straight into ctrl's database (no ctrl running on it), shaped
// like an environment update with six changed settings, for the export test and the audit bench.
import { Store } from "../../src/ctrl/db/store.js";
import { appendAuditEvent } from "../../src/ctrl/domain/audit.js";

export async function seedAuditEvents(databaseUrl: string, workspaceId: string, count: number): Promise<void> {
  const store = await Store.open({ url: databaseUrl });
  try {
    await appendEvents(store, workspaceId, count);
  } finally {
    await store.close();
  }
}

async function appendEvents(store: Store, workspaceId: string, count: number): Promise<void> {
  for (let i = 0; i < count; i += 5000)
    await store.write(async (tx) => {
      for (let j = i; j < Math.min(count, i + 5000); j++)
        await appendAuditEvent(tx, {
          workspaceId,
          actorKind: "user",
          actorId: "tok_seedseedseedseedseed",
          actorName: "ci-deploy",
          method: "EnvironmentService/UpdateEnvironment",
          targets: [workspaceId, "prj_seedseedseedseedseed", `env_${String(j % 97).padStart(20, "0")}`],
          requestId: `req_${String(j).padStart(20, "0")}`,
          clientIp: "10.1.2.3",
          userAgent: "connect-es/2.1.2 krane-cli",
          idempotencyKey: `key-${j}`,
          code: "ok",
          message: "",
          changes: Array.from({ length: 6 }, (_, k) => ({
            field: `environment.config.SETTING_${k}`,
            op: "set" as const,
            before: `value-${j}-${k}-before`,
            after: `value-${j}-${k}-after`,
          })),
        });
    });
}
