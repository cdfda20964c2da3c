// Entry point of the local Gateway's pod-network proxy (a test and dev harness, started by
// ./gateway.ts): `node --import tsx pod-proxy.ts --listen 127.0.0.1:P --map 10.S.0.0/16=127.S.0.0/16
// [--direct 10.S.128.0/17]`.
//
// A Gateway sends traffic to the pod IPs in its backends' EndpointSlices; on this machine those
// addresses live at the same offset in 127.S.0.0/16 (../pod-network.ts). Traefik's upstream
// transport honours HTTP_PROXY, so it is started with this proxy as `socks5://…`: a SOCKS5
// CONNECT names the pod address and port the Gateway chose, and the proxy connects to the mapped
// loopback address and relays the bytes both ways. (An HTTP forward proxy cannot do this job: Go
// writes the request's Host header, not the backend address, into the absolute-form URI it sends
// to an HTTP proxy, so the pod address would be lost.) Only addresses inside the mapped pod range
// are served; anything else is refused. Pods on real nodes (../nodes) have addresses in the upper
// half of the range, which this machine routes into the nodes' network namespace; `--direct`
// names that part, and the proxy connects to those addresses as they are. (Traefik's h2c
// upstreams dial without the proxy and so reached real-node pods anyway; its HTTP/1.1 upstreams go
// through the proxy, and without `--direct` reached a refused 127.S.128.x and answered 502.)
// On a real cluster none of this exists: the Gateway reaches pods directly.
import { parseArgs } from "node:util";
import { createServer, defaultConnectionHandler } from "@pondwader/socks5-server";
import { cidrContains, mapAddress, parseAddressMapping, parseCidr } from "../../contracts/address-map.js";

const { values } = parseArgs({
  options: { listen: { type: "string" }, map: { type: "string" }, direct: { type: "string" } },
});
const listen = /^(.+):(\d+)$/.exec(values.listen ?? "");
if (!listen || !values.map) {
  console.error("usage: pod-proxy.ts --listen HOST:PORT --map FROM_CIDR=TO_CIDR [--direct CIDR]");
  process.exit(2);
}
const mapping = parseAddressMapping(values.map);
const direct = values.direct === undefined ? undefined : parseCidr(values.direct);

const server = createServer();
server.setRulesetValidator((c) => c.command === "connect" && cidrContains(mapping.from, c.destAddress));
server.setConnectionHandler((c, sendStatus) => {
  if (!direct || !cidrContains(direct, c.destAddress)) c.destAddress = mapAddress(c.destAddress, mapping);
  defaultConnectionHandler(c, sendStatus);
});
server.listen(Number(listen[2]), listen[1], () =>
  console.log(`pod proxy (SOCKS5) listening on ${values.listen}, mapping ${values.map}`),
);
const stop = (): void => void server.close(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
