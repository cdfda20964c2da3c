// A stand-in upstream for `npm run bench -- sentinel`, run as its own process so the proxy
// under test never shares an event loop with it: listens on every "address:port" given as an
// argument and answers each request with a short body naming the address that answered.
import * as http from "node:http";

const targets = process.argv.slice(2);
let open = 0;
for (const t of targets) {
  const i = t.lastIndexOf(":");
  const host = t.slice(0, i);
  const port = Number(t.slice(i + 1));
  const body = Buffer.from(`ok ${host}\n`);
  const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/plain", "content-length": body.length });
      res.end(body);
    });
  });
  server.listen(port, host, () => {
    open++;
    if (open === targets.length) process.stdout.write("listening\n");
  });
}
process.on("SIGTERM", () => process.exit(0));
