// Image references (src/contracts/images.ts): which registry an image comes from, its repository,
// tag and digest, Docker Hub's short names, the pinned form pods run, and what is not an image.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  dockerConfigJson,
  dockerConfigKey,
  imageAsRun,
  pullFailureReason,
  parseImageRef,
  pinnedImage,
  registryApiHost,
  registryHost,
  registryOf,
} from "../../../src/contracts/images.js";

const D = `sha256:${"a".repeat(64)}`;

describe("image references", () => {
  it("reads registry, repository, tag and digest", () => {
    const cases: [string, string, string, string | undefined, string | undefined][] = [
      ["nginx", "docker.io", "library/nginx", undefined, undefined],
      ["nginx:1.27", "docker.io", "library/nginx", "1.27", undefined],
      ["acme/web:1", "docker.io", "acme/web", "1", undefined],
      ["docker.io/acme/web:1", "docker.io", "acme/web", "1", undefined],
      ["index.docker.io/nginx:1", "docker.io", "library/nginx", "1", undefined],
      ["ghcr.io/acme/web:1.2", "ghcr.io", "acme/web", "1.2", undefined],
      ["10.1.255.1:5000/app:v1", "10.1.255.1:5000", "app", "v1", undefined],
      ["localhost/app", "localhost", "app", undefined, undefined],
      ["krane.local/hello:v1", "krane.local", "hello", "v1", undefined],
      [`ghcr.io/acme/web@${D}`, "ghcr.io", "acme/web", undefined, D],
      [`ghcr.io/acme/web:1@${D}`, "ghcr.io", "acme/web", "1", D],
      ["Registry.Example.com:443/a/b/c:x", "registry.example.com:443", "a/b/c", "x", undefined],
      ["my_org/web", "docker.io", "my_org/web", undefined, undefined],
    ];
    for (const [image, registry, repository, tag, digest] of cases) {
      const r = parseImageRef(image);
      assert.ok(r, image);
      assert.deepEqual([r.registry, r.repository, r.tag, r.digest], [registry, repository, tag, digest], image);
    }
  });

  it("pins an image by its name as given, dropping the tag", () => {
    assert.equal(pinnedImage(parseImageRef("nginx:1.27")!, D), `nginx@${D}`);
    assert.equal(pinnedImage(parseImageRef("10.1.255.1:5000/app:v1")!, D), `10.1.255.1:5000/app@${D}`);
    assert.equal(pinnedImage(parseImageRef(`ghcr.io/a/b:1@${D}`)!, D), `ghcr.io/a/b@${D}`);
    assert.equal(parseImageRef(`ghcr.io/a/b@${D}`)!.name, "ghcr.io/a/b");
  });

  it("refuses what is not an image", () => {
    for (const bad of [
      "",
      "https://ghcr.io/a:1",
      "ghcr.io/A/b",
      "Acme/web",
      "ghcr.io/a:",
      "a b",
      "ghcr.io/a@sha256:abc",
      `ghcr.io/a@sha256:${"A".repeat(64)}`,
      "ghcr.io:99999/a",
    ]) {
      assert.equal(parseImageRef(bad), undefined, bad);
    }
  });

  it("canonical registry hosts; Docker Hub's aliases are docker.io", () => {
    assert.equal(registryHost("GHCR.io"), "ghcr.io");
    assert.equal(registryHost("index.docker.io"), "docker.io");
    assert.equal(registryHost("registry-1.docker.io"), "docker.io");
    assert.equal(registryHost("10.0.0.1:5000"), "10.0.0.1:5000");
    for (const bad of ["https://ghcr.io", "ghcr.io/acme", "user@ghcr.io", "", "a b", "ghcr.io:0", "ghcr.io:70000"])
      assert.equal(registryHost(bad), undefined, bad);
    assert.equal(registryApiHost("docker.io"), "registry-1.docker.io");
    assert.equal(registryApiHost("ghcr.io"), "ghcr.io");
    assert.equal(dockerConfigKey("docker.io"), "https://index.docker.io/v1/");
    assert.equal(dockerConfigKey("10.0.0.1:5000"), "10.0.0.1:5000");
    assert.equal(registryOf("10.0.0.1:5000/app@" + D), "10.0.0.1:5000");
    assert.equal(registryOf("nginx"), "docker.io");
    assert.equal(registryOf("not an image"), "");
  });

  it("runs an image pinned to its digest, or as named without one", () => {
    assert.equal(imageAsRun("ghcr.io/acme/web:1", D), `ghcr.io/acme/web@${D}`);
    assert.equal(imageAsRun("nginx", D), `nginx@${D}`);
    assert.equal(imageAsRun("ghcr.io/acme/web:1", null), "ghcr.io/acme/web:1");
    assert.equal(imageAsRun("ghcr.io/acme/web:1", ""), "ghcr.io/acme/web:1");
  });

  it("renders a pull secret's .dockerconfigjson: auth is base64 user:password, Docker Hub under its index URL", () => {
    const text = dockerConfigJson([
      { host: "ghcr.io", username: "bot", password: "p:ss wörd" },
      { host: "docker.io", username: "me", password: "tok" },
    ]);
    const parsed = JSON.parse(text) as { auths: Record<string, { username: string; password: string; auth: string }> };
    assert.deepEqual(Object.keys(parsed.auths), ["https://index.docker.io/v1/", "ghcr.io"]);
    const ghcr = parsed.auths["ghcr.io"]!;
    assert.equal(ghcr.username, "bot");
    assert.equal(ghcr.password, "p:ss wörd");
    assert.equal(Buffer.from(ghcr.auth, "base64").toString("utf8"), "bot:p:ss wörd");
    // The same credentials in any order are the same bytes.
    assert.equal(
      dockerConfigJson([
        { host: "docker.io", username: "me", password: "tok" },
        { host: "ghcr.io", username: "bot", password: "p:ss wörd" },
      ]),
      text,
    );
    assert.equal(dockerConfigJson([]), '{"auths":{}}');
  });

  it("tells why a pull failed from containerd's message", () => {
    const cases: [string, string | undefined][] = [
      [
        'failed to pull and unpack image "ghcr.io/a/b:1": failed to resolve reference "ghcr.io/a/b:1": failed to authorize: failed to fetch oauth token: unexpected status from GET request to https://ghcr.io/token?scope=repository%3Aa%2Fb%3Apull: 401 Unauthorized',
        "401 unauthorized",
      ],
      [
        'failed to resolve reference "r.io/a:1": unexpected status from HEAD request to https://r.io/v2/a/manifests/1: 403 Forbidden',
        "403 forbidden",
      ],
      [
        "pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed",
        "403 forbidden",
      ],
      ['failed to resolve reference "ghcr.io/a/b:nope": ghcr.io/a/b:nope: not found', "not found"],
      ["tls: failed to verify certificate: x509: certificate signed by unknown authority", "untrusted certificate"],
      ["context deadline exceeded", undefined],
    ];
    for (const [message, want] of cases) assert.equal(pullFailureReason(message), want, message);
  });
});
