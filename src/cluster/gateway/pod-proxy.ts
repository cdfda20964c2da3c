// Entry point of the local Gateway's pod-network proxy (a test and dev harness, started by
// ./gateway.ts): `node --import tsx pod-proxy.ts --listen 127.0.0.1:P --map 10.S.0.0/16=127.S.0.0/16`.
//
// A Gateway sends traffic to the pod IPs in its backends' EndpointSlices; on this machine those
// addresses live at the same offset in 127.S.0.0/16 (../pod-network.ts). Traefik honours
// HTTP_PROXY for its upstreams, so it is started with this forward proxy as its HTTP_PROXY: each
// absolute-form request (`GET http://10.S.a.b:8040/path`) is forwarded, streamed both ways, to
// the mapped address with the same path and headers. Loopback targets are left to Go, which
// never proxies them. On a real cluster none of this exists: the Gateway reaches pods directly.
import { request, createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { parseArgs } from "node:util";
import { mapAddress, parseAddressMapping } from "../../sentinel/address-map.js";

const HOP = new Set(["proxy-connection", "proxy-authorization", "connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade"]);

const { values } = parseArgs({ options: { listen: { type: "string" }, map: { type: "string" } } });
const listen = /^(.+):(\d+)$/.exec(values.listen ?? "");
if (!listen || !values.map) {
  console.error("usage: pod-proxy.ts --listen HOST:PORT --map FROM_CIDR=TO_CIDR");
  process.exit(2);
}
const mapping = parseAddressMapping(values.map);

function forward(req: IncomingMessage, res: ServerResponse): void {
  let target: URL;
  try {
    target = new URL(req.url ?? "");
  } catch {
    res.writeHead(400).end("absolute-form request expected\n");
    return;
  }
  const headers: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !HOP.has(k)) headers[k] = v;
  const up = request(
    { host: mapAddress(target.hostname, mapping), port: target.port || 80, method: req.method, path: `${target.pathname}${target.search}`, headers },
    (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.headers);
      upRes.pipe(res);
    },
  );
  up.on("error", (err) => {
    if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" }).end(`pod proxy: ${err.message}\n`);
    else res.destroy();
  });
  req.pipe(up);
}

const server = createServer(forward);
server.keepAliveTimeout = 120_000;
server.listen(Number(listen[2]), listen[1], () => console.log(`pod proxy listening on ${values.listen}, mapping ${values.map}`));
const stop = (): void => void server.close(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
