// The light JSON client of `krane status` (src/cli/json-call.ts) against a real HTTP/2 server on
// a local port: what it sends, how it reads answers and errors (ctrl's Connect errors, and bare
// HTTP statuses from something in between), and its retries while ctrl is unavailable.
import { test } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import type { AddressInfo } from "node:net";
import { CallError, codeFromHttpStatus, JsonCtrl, parse } from "../../../src/cli/json-call.js";

type Handler = (headers: IncomingHttpHeaders, body: string, stream: ServerHttp2Stream) => void;

async function server(handler: Handler): Promise<{ url: string; close: () => Promise<void> }> {
  const s = createServer();
  s.on("stream", (stream, headers) => {
    let body = "";
    stream.setEncoding("utf8");
    stream.on("data", (c: string) => (body += c));
    stream.on("end", () => handler(headers, body, stream));
  });
  s.listen(0, "127.0.0.1");
  await once(s, "listening");
  const { port } = s.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((r) => s.close(() => r())) };
}

const answer = (stream: ServerHttp2Stream, status: number, body: string, type = "application/json") => {
  stream.respond({ ":status": status, "content-type": type });
  stream.end(body);
};

test("a call is a Connect unary POST in JSON with the bearer token, and its answer is the parsed JSON", async () => {
  const seen: { path: string; headers: IncomingHttpHeaders; body: string }[] = [];
  const s = await server((headers, body, stream) => {
    seen.push({ path: String(headers[":path"]), headers, body });
    answer(stream, 200, JSON.stringify({ workspaces: [{ slug: "acme" }] }));
  });
  const ctrl = new JsonCtrl({ ctrlUrl: s.url, token: "krane_user_t" });
  try {
    const res = await ctrl.call<{ workspaces: { slug: string }[] }>(
      "krane.ctrl.v1.WorkspaceService",
      "ListWorkspaces",
      {
        pageSize: 2,
      },
    );
    assert.deepEqual(res, { workspaces: [{ slug: "acme" }] });
    const [req] = seen;
    assert.equal(req?.path, "/krane.ctrl.v1.WorkspaceService/ListWorkspaces");
    assert.equal(req?.headers[":method"], "POST");
    assert.equal(req?.headers["content-type"], "application/json");
    assert.equal(req?.headers["connect-protocol-version"], "1");
    assert.equal(req?.headers["authorization"], "Bearer krane_user_t");
    assert.equal(req?.headers["connect-timeout-ms"], "30000");
    assert.deepEqual(JSON.parse(req?.body ?? ""), { pageSize: 2 });
  } finally {
    ctrl.close();
    await s.close();
  }
});

test("ctrl's errors keep their code and message; an answer that is not ctrl's maps its HTTP status as Connect does", () => {
  const err = (status: number, body: string, type = "application/json"): CallError => {
    try {
      parse({ status, contentType: type, body });
    } catch (e) {
      assert.ok(e instanceof CallError);
      return e;
    }
    assert.fail("parsed without an error");
  };
  const nf = err(404, JSON.stringify({ code: "not_found", message: 'environment "x" not found' }));
  assert.deepEqual(
    [nf.code, nf.rawMessage, nf.message],
    ["not_found", 'environment "x" not found', 'not_found: environment "x" not found'],
  );
  assert.equal(err(503, "upstream connect error", "text/plain").code, "unavailable");
  assert.equal(err(502, "").code, "unavailable");
  assert.equal(err(401, "").code, "unauthenticated");
  assert.equal(err(400, "<html>").code, "internal");
  assert.equal(err(200, "<html>", "text/html").code, "internal", "a 200 that is not JSON is not an answer");
  assert.equal(err(200, "[1]").code, "internal", "an answer is an object");
  for (const [status, code] of [
    [403, "permission_denied"],
    [404, "unimplemented"],
    [429, "unavailable"],
    [504, "unavailable"],
    [500, "unknown"],
  ] as const)
    assert.equal(codeFromHttpStatus(status), code);
});

test("an unavailable ctrl is retried for --retry-for, a line per retry on stderr; any other error is not", async () => {
  let calls = 0;
  const s = await server((headers, _body, stream) => {
    calls++;
    if (String(headers[":path"]).endsWith("/Missing"))
      return answer(stream, 404, JSON.stringify({ code: "not_found", message: "no such thing" }));
    if (calls <= 2)
      return answer(stream, 503, JSON.stringify({ code: "unavailable", message: "ctrl's database is down" }));
    answer(stream, 200, "{}");
  });
  const ctrl = new JsonCtrl({ ctrlUrl: s.url, token: "t", retryFor: "20s" });
  const written: string[] = [];
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((line: string) => written.push(line) > 0) as typeof process.stderr.write;
  try {
    assert.deepEqual(await ctrl.call("krane.ctrl.v1.StatusService", "GetEnvironmentStatus", {}), {});
    assert.equal(calls, 3);
    assert.equal(written.length, 2);
    assert.match(written[0] ?? "", /^krane: ctrl's database is down; retrying GetEnvironmentStatus in \d+\.\d s/);
    await assert.rejects(ctrl.call("krane.ctrl.v1.StatusService", "Missing", {}), { code: "not_found" });
    assert.equal(calls, 4, "not_found is an answer, not retried");
  } finally {
    process.stderr.write = write;
    ctrl.close();
    await s.close();
  }
});

test("ctrl not reached is unavailable, naming the cause; with --retry-for 0 it is not retried", async () => {
  const s = await server(() => {});
  const url = s.url;
  await s.close();
  const ctrl = new JsonCtrl({ ctrlUrl: url, token: "t", retryFor: "0" });
  try {
    await assert.rejects(ctrl.call("krane.ctrl.v1.StatusService", "GetEnvironmentStatus", {}), (e: unknown) => {
      assert.ok(e instanceof CallError);
      assert.equal(e.code, "unavailable");
      assert.match(
        e.rawMessage,
        /^ctrl is not reachable at http:\/\/127\.0\.0\.1:\d+ \(connect ECONNREFUSED [^)]+\): is it running\?$/,
      );
      return true;
    });
  } finally {
    ctrl.close();
  }
});

test("no answer within the deadline is deadline_exceeded", async () => {
  const s = await server(() => {
    // Never answers.
  });
  const ctrl = new JsonCtrl({ ctrlUrl: s.url, token: "t", retryFor: "0" }, { timeoutMs: 200 });
  try {
    await assert.rejects(ctrl.call("krane.ctrl.v1.StatusService", "GetEnvironmentStatus", {}), {
      code: "deadline_exceeded",
    });
  } finally {
    ctrl.close();
    await s.close();
  }
});

test("no token (and no stored sign-in) is refused before anything is sent", async () => {
  const before = process.env.KRANE_CONFIG;
  process.env.KRANE_CONFIG = "/nonexistent/krane/config.json";
  const ctrl = new JsonCtrl({ ctrlUrl: "http://127.0.0.1:1", retryFor: "0" });
  try {
    await assert.rejects(
      ctrl.call("krane.ctrl.v1.StatusService", "GetStatus", {}),
      /no API token: pass --token or set KRANE_TOKEN, or sign in with krane login/,
    );
  } finally {
    ctrl.close();
    if (before === undefined) delete process.env.KRANE_CONFIG;
    else process.env.KRANE_CONFIG = before;
  }
});
