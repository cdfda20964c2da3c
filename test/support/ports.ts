// Ports for test servers that are stopped and started again on the same port.
import { createServer } from "node:net";

/** Whether `port` can be listened on at 127.0.0.1 right now. */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
}

/**
 * A free port for a process that is killed and restarted on it. It is chosen below Linux's
 * ephemeral range (32768–60999 by default), which the kernel hands out to every outgoing
 * connection and every listen on port 0: a port from there was taken by another test while ctrl
 * was down, and the restarted ctrl failed with EADDRINUSE.
 */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (await canListen(port)) return port;
  }
  throw new Error("no free port in 20000–31999");
}
