// Bad wire input on every method of every service (enumerated from the generated descriptors,
// so a new method is covered without touching this file), over Connect (binary and JSON, unary
// and streaming), gRPC and gRPC-Web, on a real HTTP/2 server: a body that is not a valid
// message is answered invalid_argument with a message naming the problem, never internal, and
// is counted as InvalidArgument in krane_ctrl_rpc_total.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import * as http2 from "node:http2";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { file_krane_ctrl_v1_api } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { file_krane_ctrl_v1_cluster } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { file_krane_ctrl_v1_rollout } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { startTestCtrl, tempDir, type TestCtrl } from "./support.js";

const services: DescService[] = [
  file_krane_ctrl_v1_api,
  file_krane_ctrl_v1_cluster,
  file_krane_ctrl_v1_rollout,
].flatMap((f) => f.services);
const dir = tempDir();
let ctrl: TestCtrl;
let agentToken: string;
let session: http2.ClientHttp2Session;

before(async () => {
  ctrl = await startTestCtrl(`${dir.path}/ctrl.db`);
  agentToken = await ctrl.agentToken("local");
  session = http2.connect(ctrl.url);
});

after(async () => {
  session.close();
  await ctrl.close();
  dir.remove();
});

interface Answer {
  status: number;
  headers: http2.IncomingHttpHeaders;
  body: Buffer;
  trailers: http2.IncomingHttpHeaders;
}

function send(path: string, headers: Record<string, string>, body: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = session.request({ ":method": "POST", ":path": path, ...headers });
    let status = 0;
    let head: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    req.on("response", (h) => {
      status = Number(h[":status"]);
      head = h;
    });
    req.on("trailers", (t) => (trailers = t));
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve({ status, headers: head, body: Buffer.concat(chunks), trailers }));
    req.on("error", reject);
    req.setTimeout(10_000, () => req.destroy(new Error(`${path}: no answer within 10 s`)));
    req.end(body);
  });
}

function envelope(flags: number, payload: Buffer, claimedLength = payload.length): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(claimedLength, 1);
  return Buffer.concat([head, payload]);
}

function frames(body: Buffer): { flags: number; data: Buffer }[] {
  const out: { flags: number; data: Buffer }[] = [];
  for (let i = 0; i + 5 <= body.length;) {
    const len = body.readUInt32BE(i + 1);
    out.push({ flags: body[i] ?? 0, data: body.subarray(i + 5, i + 5 + len) });
    i += 5 + len;
  }
  return out;
}

/** The status of an answer, whatever its protocol: [code name, message]. */
function outcome(protocol: string, a: Answer): [string, string] {
  if (protocol === "connect") {
    if (a.status === 200) return ["ok", ""];
    const e = JSON.parse(a.body.toString()) as { code: string; message?: string };
    return [e.code, e.message ?? ""];
  }
  if (protocol === "connect-stream") {
    const end = frames(a.body).find((f) => (f.flags & 0x02) !== 0);
    const e = (end ? JSON.parse(end.data.toString()) : {}) as { error?: { code: string; message?: string } };
    return e.error ? [e.error.code, e.error.message ?? ""] : ["ok", ""];
  }
  let fields: Record<string, string> = {};
  if (protocol === "grpc-web") {
    const t = frames(a.body).find((f) => (f.flags & 0x80) !== 0);
    for (const line of (t?.data.toString() ?? "").split("\r\n")) {
      const i = line.indexOf(":");
      if (i > 0) fields[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
  }
  const pick = (k: string): string | undefined =>
    fields[k] ?? (a.trailers[k] as string | undefined) ?? (a.headers[k] as string | undefined);
  fields = { "grpc-status": pick("grpc-status") ?? "", "grpc-message": pick("grpc-message") ?? "" };
  const names = [
    "ok",
    "canceled",
    "unknown",
    "invalid_argument",
    "deadline_exceeded",
    "not_found",
    "already_exists",
    "permission_denied",
    "resource_exhausted",
    "failed_precondition",
    "aborted",
    "out_of_range",
    "unimplemented",
    "internal",
    "unavailable",
    "data_loss",
    "unauthenticated",
  ];
  return [
    names[Number(fields["grpc-status"])] ?? `grpc-status ${fields["grpc-status"]}`,
    decodeURIComponent(fields["grpc-message"] ?? ""),
  ];
}

// Protobuf that is not a message: an invalid wire type, and a length running past the end.
const INVALID_WIRE_TYPE = Buffer.from([0x0f, 0x01]);
const TRUNCATED = Buffer.from([0x0a, 0x7f, 0x61, 0x62]);

interface Case {
  readonly protocol: "connect" | "connect-stream" | "grpc" | "grpc-web";
  readonly what: string;
  readonly contentType: string;
  readonly body: Buffer;
  /** Whether the message must name the request's message type (protobuf decoding failures). */
  readonly namesType: boolean;
}

function cases(m: DescMethod): Case[] {
  const unary = m.methodKind === "unary";
  const out: Case[] = [];
  if (unary) {
    out.push(
      {
        protocol: "connect",
        what: "invalid wire type",
        contentType: "application/proto",
        body: INVALID_WIRE_TYPE,
        namesType: true,
      },
      {
        protocol: "connect",
        what: "truncated protobuf",
        contentType: "application/proto",
        body: TRUNCATED,
        namesType: true,
      },
      {
        protocol: "connect",
        what: "truncated JSON",
        contentType: "application/json",
        body: Buffer.from('{"name": "x'),
        namesType: false,
      },
      {
        protocol: "connect",
        what: "not JSON",
        contentType: "application/json",
        body: Buffer.from("garbage \u0000\u00ff"),
        namesType: false,
      },
      {
        protocol: "connect",
        what: "JSON of the wrong shape",
        contentType: "application/json",
        body: Buffer.from("[1, 2, 3]"),
        namesType: true,
      },
    );
  } else {
    out.push(
      {
        protocol: "connect-stream",
        what: "invalid wire type",
        contentType: "application/connect+proto",
        body: envelope(0, INVALID_WIRE_TYPE),
        namesType: true,
      },
      {
        protocol: "connect-stream",
        what: "truncated frame",
        contentType: "application/connect+proto",
        body: envelope(0, TRUNCATED, 40),
        namesType: false,
      },
      {
        protocol: "connect-stream",
        what: "not JSON",
        contentType: "application/connect+json",
        body: envelope(0, Buffer.from("{nope")),
        namesType: false,
      },
      {
        protocol: "connect-stream",
        what: "no message",
        contentType: "application/connect+proto",
        body: Buffer.alloc(0),
        namesType: true,
      },
    );
  }
  out.push(
    {
      protocol: "grpc",
      what: "invalid wire type",
      contentType: "application/grpc",
      body: envelope(0, INVALID_WIRE_TYPE),
      namesType: true,
    },
    {
      protocol: "grpc",
      what: "truncated protobuf",
      contentType: "application/grpc+proto",
      body: envelope(0, TRUNCATED),
      namesType: true,
    },
    {
      protocol: "grpc",
      what: "truncated frame",
      contentType: "application/grpc",
      body: envelope(0, TRUNCATED, 40),
      namesType: false,
    },
    { protocol: "grpc", what: "no message", contentType: "application/grpc", body: Buffer.alloc(0), namesType: true },
    {
      protocol: "grpc",
      what: "two messages",
      contentType: "application/grpc",
      body: Buffer.concat([envelope(0, Buffer.alloc(0)), envelope(0, Buffer.alloc(0))]),
      namesType: true,
    },
    {
      protocol: "grpc-web",
      what: "invalid wire type",
      contentType: "application/grpc-web+proto",
      body: envelope(0, INVALID_WIRE_TYPE),
      namesType: true,
    },
    {
      protocol: "grpc-web",
      what: "truncated protobuf",
      contentType: "application/grpc-web",
      body: envelope(0, TRUNCATED),
      namesType: true,
    },
    {
      protocol: "grpc-web",
      what: "truncated frame",
      contentType: "application/grpc-web+proto",
      body: envelope(0, TRUNCATED, 40),
      namesType: false,
    },
    {
      protocol: "grpc-web",
      what: "no message",
      contentType: "application/grpc-web+proto",
      body: Buffer.alloc(0),
      namesType: true,
    },
  );
  return out;
}

function headersFor(c: Case, token: string): Record<string, string> {
  const h: Record<string, string> = { "content-type": c.contentType, authorization: `Bearer ${token}` };
  if (c.protocol === "connect") h["connect-protocol-version"] = "1";
  if (c.protocol === "grpc") h.te = "trailers";
  return h;
}

async function invalidArgumentCounts(): Promise<Map<string, number>> {
  const metric = await ctrl.metrics.rpcTotal.get();
  const out = new Map<string, number>();
  for (const v of metric.values) {
    const key = `${String(v.labels.service)}/${String(v.labels.method)}/${String(v.labels.code)}`;
    out.set(key, (out.get(key) ?? 0) + v.value);
  }
  return out;
}

test("every method answers undecodable bodies with invalid_argument on every protocol, and counts them", async () => {
  const methods = services.flatMap((s) => s.methods);
  assert.ok(methods.length >= 39, `only ${methods.length} methods found in the descriptors`);
  const wrong: string[] = [];
  const sent = new Map<string, number>();
  let total = 0;
  for (const m of methods) {
    const token = m.parent.typeName === "krane.ctrl.v1.ClusterService" ? agentToken : ctrl.adminToken;
    for (const c of cases(m)) {
      const a = await send(`/${m.parent.typeName}/${m.name}`, headersFor(c, token), c.body);
      const [code, message] = outcome(c.protocol, a);
      const where = `${m.parent.name}/${m.name} over ${c.protocol}, ${c.what}`;
      total++;
      if (code !== "invalid_argument") wrong.push(`${where}: ${code} "${message}"`);
      else if (message === "" || /internal error/.test(message)) wrong.push(`${where}: no message`);
      else if (c.namesType && !message.includes(m.input.typeName))
        wrong.push(`${where}: the message does not name ${m.input.typeName}: "${message}"`);
      const key = `${m.parent.name}/${m.name}/InvalidArgument`;
      sent.set(key, (sent.get(key) ?? 0) + 1);
    }
  }
  assert.deepEqual(wrong, [], `${wrong.length} of ${total} answers were wrong`);
  const counted = await invalidArgumentCounts();
  const miscounted = [...sent]
    .filter(([k, n]) => counted.get(k) !== n)
    .map(([k, n]) => `${k}: sent ${n}, counted ${counted.get(k) ?? 0}`);
  assert.deepEqual(miscounted, []);
  const internal = [...counted].filter(([k]) => k.endsWith("/Internal"));
  assert.deepEqual(internal, []);
  console.log(
    `wire input: ${total} undecodable requests to ${methods.length} methods over 4 protocols: all invalid_argument`,
  );
});

test("a valid body still works on each protocol (the rewrite touches failures only)", async () => {
  const m = services.find((s) => s.name === "WorkspaceService")?.methods.find((x) => x.name === "ListWorkspaces");
  assert.ok(m);
  const path = `/${m.parent.typeName}/${m.name}`;
  const auth = `Bearer ${ctrl.adminToken}`;
  const unary = await send(
    path,
    { "content-type": "application/proto", "connect-protocol-version": "1", authorization: auth },
    Buffer.alloc(0),
  );
  assert.equal(unary.status, 200);
  const json = await send(
    path,
    { "content-type": "application/json", "connect-protocol-version": "1", authorization: auth },
    Buffer.from("{}"),
  );
  assert.equal(json.status, 200);
  assert.deepEqual(JSON.parse(json.body.toString()), {});
  const grpc = await send(
    path,
    { "content-type": "application/grpc", te: "trailers", authorization: auth },
    envelope(0, Buffer.alloc(0)),
  );
  assert.equal(outcome("grpc", grpc)[0], "ok");
  const web = await send(
    path,
    { "content-type": "application/grpc-web+proto", authorization: auth },
    envelope(0, Buffer.alloc(0)),
  );
  assert.equal(outcome("grpc-web", web)[0], "ok");
  // Failures of the request that already had their proper code keep it: an unknown compression is
  // unimplemented, as gRPC specifies.
  const snappy = await send(
    path,
    { "content-type": "application/grpc", te: "trailers", "grpc-encoding": "snappy", authorization: auth },
    envelope(1, Buffer.from([1, 2, 3])),
  );
  const [code, message] = outcome("grpc", snappy);
  assert.equal(code, "unimplemented");
  assert.match(message, /unknown compression "snappy"/);
  // A known domain error keeps its code and message.
  const get = services.find((s) => s.name === "WorkspaceService")?.methods.find((x) => x.name === "GetWorkspace");
  assert.ok(get);
  const missing = await send(
    `/${get.parent.typeName}/${get.name}`,
    { "content-type": "application/json", "connect-protocol-version": "1", authorization: auth },
    Buffer.from('{"workspace":"nope"}'),
  );
  assert.equal(outcome("connect", missing)[0], "not_found");
});
