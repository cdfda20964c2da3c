// The floor on Bun for `npm run bench -- sentinel` (run with `bun`): the least a Bun reverse
// proxy does per request with the parts the sentinel's Bun shell is built on (Bun.serve, fetch,
// the answer's body handed back to Bun as it came) and nothing else: no routing table, no header
// rules, no request ids, no metrics, no timeouts, no retries. Not a product.
//   argv: <listen host:port> <upstream host:port>
interface BunLike {
  serve(o: { hostname: string; port: number; fetch(req: Request): Promise<Response> }): unknown;
}

const [listen = "", upstream = ""] = process.argv.slice(2);
const i = listen.lastIndexOf(":");
const bun = (globalThis as { Bun?: BunLike }).Bun;
if (!bun) throw new Error("run this with bun");
bun.serve({
  hostname: listen.slice(0, i),
  port: Number(listen.slice(i + 1)),
  fetch: (req) => {
    const url = req.url;
    const path = url.slice(url.indexOf("/", url.indexOf("//") + 2));
    return fetch(`http://${upstream}${path}`, {
      method: req.method,
      headers: req.headers,
      body: req.body,
      redirect: "manual",
      decompress: false,
    } as RequestInit);
  },
});
process.stdout.write("listening\n");
process.on("SIGTERM", () => process.exit(0));
