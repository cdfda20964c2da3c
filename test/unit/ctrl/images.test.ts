// Pinning deploys' images (src/ctrl/images): the registry's auth challenge as parsed, what the
// resolver never asks a registry about (local hosts), and a registry that cannot be reached as
// a refusal naming it (a closed port on this machine: a real socket, no network).
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { describe, it } from "node:test";
import { DomainError } from "../../../src/ctrl/errors.js";
import { ImageResolver } from "../../../src/ctrl/images/resolve.js";
import { isPublicAddress, parseChallenge } from "../../../src/ctrl/images/registry-client.js";
import { resolveCtrlSettings } from "../../../src/ctrl/server/config.js";

const D = `sha256:${"b".repeat(64)}`;
const none = async (): Promise<undefined> => undefined;

/** A port nothing listens on (taken, then closed). */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

describe("registry auth challenges", () => {
  it("reads Bearer and Basic challenges with quoted and bare parameters", () => {
    assert.deepEqual(
      parseChallenge('Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:acme/web:pull"'),
      {
        scheme: "bearer",
        params: { realm: "https://ghcr.io/token", service: "ghcr.io", scope: "repository:acme/web:pull" },
      },
    );
    assert.deepEqual(parseChallenge('Basic realm="krane-test"'), { scheme: "basic", params: { realm: "krane-test" } });
    assert.deepEqual(parseChallenge("bearer Realm=https://a/t, Service=reg"), {
      scheme: "bearer",
      params: { realm: "https://a/t", service: "reg" },
    });
    // A quoted value keeps its commas and escaped quotes.
    assert.deepEqual(parseChallenge('Bearer realm="https://a/t",scope="repository:a:pull,push",x="q\\"d"'), {
      scheme: "bearer",
      params: { realm: "https://a/t", scope: "repository:a:pull,push", x: 'q"d' },
    });
    assert.equal(parseChallenge(null), undefined);
    assert.equal(parseChallenge(""), undefined);
  });
});

describe("image resolution", () => {
  it("never asks about images of local hosts; a digest given is taken as is", async () => {
    const r = new ImageResolver({ localHosts: ["krane.local", "10.0.0.1:5000"] });
    let asked = 0;
    const lookup = async (): Promise<undefined> => {
      asked++;
      return undefined;
    };
    try {
      assert.equal(await r.resolve("image", "krane.local/hello:v1", lookup), null);
      assert.equal(await r.resolve("image", `krane.local/hello@${D}`, lookup), D);
      assert.equal(await r.resolve("image", "10.0.0.1:5000/app:v1", lookup), null);
      assert.equal(asked, 0, "no credential looked up for a local host");
    } finally {
      await r.close();
    }
  });

  it("an unreachable registry refuses the deploy naming the host; bad references name the field", async () => {
    const port = await closedPort();
    const r = new ImageResolver({ localHosts: [], timeoutMs: 5000, privateHosts: ["127.0.0.1"] });
    try {
      await assert.rejects(r.resolve("image", `127.0.0.1:${port}/team/app:v1`, none), (e: unknown) => {
        assert.ok(e instanceof DomainError);
        assert.equal(e.code, "failed_precondition");
        assert.match(e.message, new RegExp(`registry 127\\.0\\.0\\.1:${port} could not be reached`));
        assert.match(e.message, /team\/app:v1/);
        assert.match(e.message, /ECONNREFUSED/);
        return true;
      });
      await assert.rejects(r.resolve("image", "Not/An:Image:", none), (e: unknown) => {
        assert.ok(e instanceof DomainError);
        assert.equal(e.field, "image");
        return true;
      });
    } finally {
      await r.close();
    }
  });
});

describe("image hosts at addresses that are not public", () => {
  it("loopback, private, link-local, CGNAT and mapped addresses are not public; others are", () => {
    for (const a of ["127.0.0.1", "10.1.2.3", "172.20.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0"])
      assert.equal(isPublicAddress(a), false, a);
    for (const a of ["::1", "::", "fd00::1", "fe80::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1"])
      assert.equal(isPublicAddress(a), false, a);
    for (const a of ["1.1.1.1", "140.82.112.34", "172.32.0.1", "2606:4700::1111"])
      assert.equal(isPublicAddress(a), true, a);
    assert.equal(isPublicAddress("not-an-address"), false);
  });

  it("a tenant's image naming a private address or a name that resolves to one reaches nothing, unless its host is allowed", async () => {
    // A real listener on loopback that counts connections: the refusal must come before any.
    let connections = 0;
    const s = createServer((sock) => {
      connections++;
      sock.destroy();
    });
    await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
    const port = (s.address() as { port: number }).port;
    const guarded = new ImageResolver({ localHosts: [], timeoutMs: 5000 });
    const allowing = new ImageResolver({ localHosts: [], timeoutMs: 5000, privateHosts: ["localhost"] });
    try {
      for (const image of [`127.0.0.1:${port}/team/app:v1`, `localhost:${port}/team/app:v1`, `[::1]:${port}/a:v1`]) {
        await assert.rejects(guarded.resolve("image", image, none), (e: unknown) => {
          assert.ok(e instanceof DomainError);
          assert.equal(e.code, "failed_precondition");
          assert.match(e.message, /not a public address.*--registry-private-hosts/);
          return true;
        });
      }
      assert.equal(connections, 0, "no connection to the private address");
      // Allowed by name: the connection is made (and fails, as this listener is no registry).
      await assert.rejects(allowing.resolve("image", `localhost:${port}/team/app:v1`, none), /could not be reached/);
      assert.ok(connections >= 1, "the allowed host was connected to");
    } finally {
      await guarded.close();
      await allowing.close();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
  });
});

describe("ctrl's image settings", () => {
  it("resolve by default with krane.local local; off; hosts checked", () => {
    const s = (flags: Record<string, string>) => resolveCtrlSettings(flags, {}, {}).images;
    assert.deepEqual(s({}), { localHosts: ["krane.local"], caFile: undefined, privateHosts: [] });
    assert.deepEqual(s({ registryPrivateHosts: "Registry.Krane-System.svc, 10.0.0.5,[::1]" })?.privateHosts, [
      "registry.krane-system.svc",
      "10.0.0.5",
      "::1",
    ]);
    assert.throws(() => s({ registryPrivateHosts: "reg:5000" }), /registry private hosts: "reg:5000"/);
    assert.equal(s({ imageDigests: "off" }), null);
    assert.equal(resolveCtrlSettings({}, { KRANE_IMAGE_DIGESTS: "off" }, {}).images, null);
    assert.deepEqual(s({ localImageHosts: "krane.local, Reg.Internal:5000", registryCaFile: "/ca.pem" }), {
      localHosts: ["krane.local", "reg.internal:5000"],
      caFile: "/ca.pem",
      privateHosts: [],
    });
    assert.throws(() => s({ imageDigests: "yes" }), /image digests/);
    assert.throws(() => s({ localImageHosts: "https://x" }), /local image hosts: "https:\/\/x"/);
  });
});
