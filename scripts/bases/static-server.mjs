// krane's static-site server, in the node base image (/usr/local/lib/krane/static-server.mjs):
// images krane builds from a directory with an index.html run `node static-server.mjs ROOT`. It
// serves ROOT's files on $PORT (default 8080): a directory's index.html, `/about` as about.html
// or about/index.html, 404.html (when there is one) for what is missing, HEAD as GET without the
// body, and nothing outside ROOT (paths are resolved and checked, symbolic links included).
import { createReadStream } from "node:fs";
import { realpath, stat } from "node:fs/promises";
import { createServer } from "node:http";
import { extname, join, resolve, sep } from "node:path";

const root = await realpath(resolve(process.argv[2] ?? "."));
const port = Number(process.env.PORT ?? 8080);

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".htm": "text/html; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".json": "application/json",
  ".map": "application/json",
  ".txt": "text/plain; charset=utf-8",
  ".xml": "application/xml",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".avif": "image/avif",
  ".ico": "image/x-icon",
  ".woff": "font/woff",
  ".woff2": "font/woff2",
  ".wasm": "application/wasm",
  ".pdf": "application/pdf",
  ".webmanifest": "application/manifest+json",
};

/** The file to serve for a URL path, or undefined (never a path outside root). */
async function find(urlPath) {
  let rel;
  try {
    rel = decodeURIComponent(urlPath);
  } catch {
    return undefined;
  }
  if (rel.includes("\0")) return undefined;
  const base = resolve(root, `.${rel.startsWith("/") ? rel : `/${rel}`}`);
  for (const candidate of [base, `${base}.html`, join(base, "index.html")]) {
    try {
      const real = await realpath(candidate);
      if (real !== root && !real.startsWith(root + sep)) continue;
      const s = await stat(real);
      if (s.isFile()) return { path: real, size: s.size };
    } catch {
      // not this one
    }
  }
  return undefined;
}

const server = createServer((req, res) => {
  void (async () => {
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { allow: "GET, HEAD" }).end();
      return;
    }
    const path = (req.url ?? "/").split("?", 1)[0] ?? "/";
    let file = await find(path);
    let status = 200;
    if (!file) {
      file = await find("/404.html");
      status = 404;
    }
    if (!file) {
      res.writeHead(404, { "content-type": "text/plain; charset=utf-8" }).end("not found\n");
      return;
    }
    res.writeHead(status, {
      "content-type": TYPES[extname(file.path).toLowerCase()] ?? "application/octet-stream",
      "content-length": file.size,
      "x-content-type-options": "nosniff",
    });
    if (req.method === "HEAD") res.end();
    else
      createReadStream(file.path)
        .on("error", () => res.destroy())
        .pipe(res);
  })().catch(() => {
    if (!res.headersSent) res.writeHead(500).end();
    else res.destroy();
  });
});
server.listen(port, () => console.log(`serving ${root} on :${port}`));
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => server.close(() => process.exit(0)));
