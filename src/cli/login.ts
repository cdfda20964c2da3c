// `krane login|logout` and `krane session list|revoke`: signing in through the installation's
// OpenID provider (`ctrl serve --oidc-issuer`), and a member's sign-in sessions.
//
// `krane login` is the authorization code flow with PKCE and a loopback redirect (RFC 8252): a
// one-shot listener on 127.0.0.1 (a port the system picks) is the redirect URI; ctrl's
// `POST /auth/oidc/begin` answers the provider's URL, which is opened in the browser (or printed,
// --no-browser), and the provider sends the browser back to the listener with the code, which
// ctrl redeems (`/auth/oidc/complete`). Not the device grant: ctrl is the provider's client and
// already runs this flow for the dashboard, every OpenID provider supports it (the device grant
// is optional and many do not offer it), and the person never types a code. The session is
// stored in the CLI's config file (cli-config.ts, 0600) and refreshed as commands run.
import { Option, type Command } from "commander";
import { when, withConnection, workspaceCommand, type ConnectionFlags } from "./command.js";

interface LoginFlags extends ConnectionFlags {
  browser: boolean;
  timeout: string;
}

export function registerLoginCommands(program: Command): void {
  withConnection(
    program
      .command("login")
      .description("sign in through the installation's OpenID provider (a browser opens; the session is stored)")
      .option("--no-browser", "print the sign-in URL instead of opening a browser")
      .option("--timeout <duration>", "how long to wait for the browser to come back", "10m"),
    { workspace: true },
  ).action(async (flags: LoginFlags) => {
    const { login } = await import("./login-flow.js");
    await login(flags);
  });

  withConnection(program.command("logout").description("end the stored sign-in session (at ctrl too)")).action(
    async (flags: ConnectionFlags) => {
      const { logout } = await import("./login-flow.js");
      await logout(flags);
    },
  );

  const session = program.command("session").description("your sign-in sessions");
  workspaceCommand(
    session
      .command("list")
      .description("list your sign-in sessions (--all-members: everyone's, admin)")
      .addOption(new Option("--all-members", "every member's sessions (admin)")),
    async (x, opts: { allMembers?: boolean }) => {
      const workspace = await x.ctrl.workspace();
      const res = await x.ctrl
        .client(x.access.SessionService)
        .listSessions({ workspace, allMembers: opts.allMembers === true });
      if (x.json) x.printJson(x.access.ListSessionsResponseSchema, res);
      else
        x.printTable(
          ["ID", "MEMBER", "CLIENT", "IP", "CREATED", "LAST USED", "EXPIRES"],
          res.sessions.map((s) => [
            `${s.id}${s.current ? " (this one)" : ""}`,
            s.email,
            s.client,
            s.ip === "" ? "-" : s.ip,
            when(s.createdAtUnixMs),
            when(s.lastUsedAtUnixMs),
            when(s.expiresAtUnixMs),
          ]),
        );
    },
  );
  workspaceCommand(
    session.command("revoke <id>").description("end a sign-in session now (another member's: admin)"),
    async (x, id: string) => {
      const workspace = await x.ctrl.workspace();
      const res = await x.ctrl.client(x.access.SessionService).revokeSession({ workspace, id });
      if (x.json && res.session) x.printJson(x.access.SessionSchema, res.session);
      else
        process.stdout.write(`revoked ${id}${res.session ? ` (${res.session.email}, ${res.session.client})` : ""}\n`);
    },
  );
}
