// The floor for `npm run bench -- sentinel`: the least a Node.js reverse proxy can do per request
// with the same parts the sentinel is built on (node:http server, undici Pool through its
// dispatch API, both bodies streamed) and nothing else — no routing table, no header rules, no
// request ids, no metrics, no timeouts, no retries. Not a product: it tells how much of the gap
// to nginx is the runtime and how much is krane's own work.
// With a third argument N > 1 it runs N processes through node:cluster (the primary accepts and
// hands connections to its workers in turn): Node with one process per core.
//   argv: <listen host:port> <upstream host:port> [processes]
import cluster from "node:cluster";
import * as http from "node:http";
import { Pool, type Dispatcher } from "undici";

const [listen = "", upstream = "", processes = "1"] = process.argv.slice(2);

function handler(res: http.ServerResponse): Dispatcher.DispatchHandler {
  return {
    onRequestStart() {
      // nothing to keep: the floor never aborts a request
    },
    onResponseStart(_c, status, headers) {
      res.writeHead(status, headers as http.OutgoingHttpHeaders);
    },
    onResponseData(_c, chunk) {
      res.write(chunk);
    },
    onResponseEnd() {
      res.end();
    },
    onResponseError() {
      if (res.headersSent) res.destroy();
      else res.writeHead(502).end();
    },
  };
}

function serve(): void {
  const pool = new Pool(`http://${upstream}`, { connections: 256 });
  const server = http.createServer({ noDelay: true }, (req, res) => {
    pool.dispatch(
      { method: req.method ?? "GET", path: req.url ?? "/", headers: req.rawHeaders, body: null, reset: false },
      handler(res),
    );
  });
  const i = listen.lastIndexOf(":");
  server.listen(Number(listen.slice(i + 1)), listen.slice(0, i), () => {
    if (cluster.isWorker) process.send?.("listening");
    else process.stdout.write("listening\n");
  });
  process.on("SIGTERM", () => process.exit(0));
}

const workers = Number(processes);
if (workers > 1 && cluster.isPrimary) {
  let up = 0;
  for (let w = 0; w < workers; w++)
    cluster.fork().on("message", (m) => {
      if (m === "listening" && ++up === workers) process.stdout.write("listening\n");
    });
  process.on("SIGTERM", () => {
    for (const w of Object.values(cluster.workers ?? {})) w?.kill("SIGTERM");
    process.exit(0);
  });
} else {
  serve();
}
