// A real DNS server on loopback for tests (dns2, UDP): answers TXT questions from a map the test
// changes while it runs, and NXDOMAIN-style empty answers for everything else. ctrl's domain
// verification talks to it through node:dns like to any resolver (--dns-servers).
import dns2 from "dns2";

export interface TestDns {
  /** "127.0.0.1:port". */
  readonly server: string;
  /** TXT records by name (lowercase, no trailing dot). */
  readonly txt: Map<string, string[]>;
  /** Questions answered so far. */
  readonly questions: () => number;
  close(): Promise<void>;
}

export async function startTestDns(): Promise<TestDns> {
  const txt = new Map<string, string[]>();
  let questions = 0;
  const { Packet } = dns2;
  const server = dns2.createServer({
    udp: true,
    handle: (request, send) => {
      const response = Packet.createResponseFromRequest(request);
      for (const q of request.questions) {
        questions++;
        const name = q.name.toLowerCase().replace(/\.$/, "");
        if (q.type !== Packet.TYPE.TXT) continue;
        for (const data of txt.get(name) ?? [])
          response.answers.push(
            new Packet.Resource({ name: q.name, type: Packet.TYPE.TXT, class: Packet.CLASS.IN, ttl: 1, data }),
          );
      }
      send(response);
    },
  });
  const addresses = await server.listen({ udp: { port: 0, address: "127.0.0.1" } });
  const port = addresses.udp?.port;
  if (port === undefined) throw new Error("the test DNS server did not listen");
  return {
    server: `127.0.0.1:${port}`,
    txt,
    questions: () => questions,
    close: async () => {
      await server.close();
    },
  };
}
