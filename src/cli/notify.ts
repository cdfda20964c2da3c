// `krane notify add | list | remove | test | events | smtp set | smtp show`: a workspace's
// notification channels against ctrl's NotificationService, and the installation's SMTP server.
// A Slack or webhook URL is a credential (whoever has it can post), so it is read like the
// webhook's key and the SMTP password: from a file, stdin ("-") or env:NAME, never from the command line.
import { Option, type Command } from "commander";
import { NOTIFICATION_EVENTS } from "../contracts/notifications.js";
import {
  collect,
  intArg,
  readSecret,
  userCommand,
  when,
  workspaceCommand,
  type ConnectionFlags,
  type UserContext,
} from "./command.js";
import type { NotificationChannel, SmtpServer } from "../gen/krane/ctrl/v1/notify_pb.js";

async function service(x: UserContext) {
  const m = await import("../gen/krane/ctrl/v1/notify_pb.js");
  return { m, client: x.ctrl.client(m.NotificationService) };
}

function channelRow(c: NotificationChannel): string[] {
  const state = c.state === "failing" ? `failing (${c.consecutiveFailures} in a row)` : c.state;
  return [
    c.name,
    c.type,
    c.target,
    c.events.length === 0 ? "all" : c.events.join(","),
    c.environments.length === 0 ? "all" : c.environments.join(","),
    state,
    String(c.pending),
    c.lastError === "" ? "-" : c.lastError,
  ];
}

function smtpLine(s: SmtpServer): string {
  const who = s.username === "" ? "no sign-in" : `user ${s.username}${s.hasPassword ? " (password set)" : ""}`;
  return `${s.host}:${s.port} ${s.security}, ${who}, from ${s.from} (since ${when(s.updatedAtUnixMs)})\n`;
}

interface AddFlags extends ConnectionFlags {
  type: "slack" | "webhook" | "email";
  urlFile?: string;
  secretFile?: string;
  to?: string[];
  event?: string[];
  env?: string[];
}

interface SmtpFlags extends ConnectionFlags {
  host: string;
  port?: number;
  security?: string;
  username?: string;
  passwordFile?: string;
  from: string;
}

export function registerNotifyCommands(program: Command): void {
  const notify = program
    .command("notify")
    .description("notification channels: Slack, signed webhooks and email about deploys, rollbacks and instances");

  workspaceCommand(
    notify
      .command("add <name>")
      .description("add a channel to the workspace (it gets every event of every environment unless narrowed)")
      .addOption(
        new Option("--type <type>", "the channel's kind").choices(["slack", "webhook", "email"]).makeOptionMandatory(),
      )
      .option("--url-file <file>", "slack, webhook: the receiver's URL (https://), from a file, - or env:NAME")
      .option("--secret-file <file>", "webhook: the HMAC key (16-256 characters), from a file, - or env:NAME")
      .option("--to <address>", "email: a recipient (repeatable)", collect)
      .option("--event <event>", "an event to send (repeatable; default all; krane notify events lists them)", collect)
      .option("--env <project/env>", "an environment to hear about (repeatable; default all)", collect),
    async (x, name: string, f: AddFlags) => {
      const { m, client } = await service(x);
      const url = f.type === "email" ? "" : await readSecret("--url-file", f.urlFile);
      const target =
        f.type === "slack"
          ? { case: "slack" as const, value: { url } }
          : f.type === "webhook"
            ? { case: "webhook" as const, value: { url, secret: await readSecret("--secret-file", f.secretFile) } }
            : { case: "email" as const, value: { to: f.to ?? [] } };
      const { channel } = await client.addChannel({
        workspace: await x.ctrl.workspace(),
        name,
        target,
        events: f.event ?? [],
        environments: f.env ?? [],
      });
      if (!channel) return;
      if (x.json) x.printJson(m.NotificationChannelSchema, channel);
      else process.stdout.write(`channel ${channel.name} (${channel.type}) delivers to ${channel.target}\n`);
    },
  );
  workspaceCommand(
    notify.command("list").description("the workspace's channels and how their deliveries stand"),
    async (x) => {
      const { m, client } = await service(x);
      const res = await client.listChannels({ workspace: await x.ctrl.workspace() });
      if (x.json) x.printJson(m.ListChannelsResponseSchema, res);
      else
        x.printTable(
          ["NAME", "TYPE", "TARGET", "EVENTS", "ENVIRONMENTS", "STATE", "PENDING", "LAST ERROR"],
          res.channels.map(channelRow),
        );
    },
  );
  workspaceCommand(
    notify.command("remove <name>").description("remove a channel and what it has not delivered"),
    async (x, name: string) => {
      const { client } = await service(x);
      await client.removeChannel({ workspace: await x.ctrl.workspace(), name });
      if (!x.json) process.stdout.write(`removed channel ${name}\n`);
    },
  );
  workspaceCommand(
    notify.command("test <name>").description("send a test message to a channel now"),
    async (x, name: string) => {
      const { m, client } = await service(x);
      const res = await client.testChannel({ workspace: await x.ctrl.workspace(), name });
      if (x.json) x.printJson(m.TestChannelResponseSchema, res);
      else if (res.delivered) process.stdout.write(`channel ${name} took the test message\n`);
      if (!res.delivered) {
        if (!x.json) process.stderr.write(`channel ${name} did not take the test message: ${res.error}\n`);
        process.exitCode = 1;
      }
    },
  );
  notify
    .command("events")
    .description("the events a channel can subscribe to")
    .action(() => {
      for (const [name, what] of Object.entries(NOTIFICATION_EVENTS)) process.stdout.write(`${name}\t${what}\n`);
    });

  const smtp = notify.command("smtp").description("the installation's SMTP server, which email channels send through");
  userCommand(
    smtp
      .command("set")
      .description("name the SMTP server (ctrl connects and signs in first: a server that does not answer is refused)")
      .requiredOption("--host <host>", "the server's hostname or address")
      .option("--port <port>", "default 587 (starttls), 465 (tls), 25 (none)", intArg("--port"))
      .addOption(new Option("--security <mode>", "default starttls").choices(["starttls", "tls", "none"]))
      .option("--username <name>", "sign in as")
      .option("--password-file <file>", "the password, from a file, - or env:NAME")
      .requiredOption("--from <address>", "the From address of every message"),
    async (x, f: SmtpFlags) => {
      const { m, client } = await service(x);
      const { server } = await client.setSmtpServer({
        host: f.host,
        port: f.port ?? 0,
        security: f.security ?? "",
        username: f.username ?? "",
        password: await readSecret("--password-file", f.passwordFile),
        from: f.from,
      });
      if (!server) return;
      if (x.json) x.printJson(m.SmtpServerSchema, server);
      else process.stdout.write(smtpLine(server));
    },
  );
  userCommand(smtp.command("show").description("the SMTP server email channels send through"), async (x) => {
    const { m, client } = await service(x);
    const res = await client.getSmtpServer({});
    if (x.json) x.printJson(m.GetSmtpServerResponseSchema, res);
    else process.stdout.write(res.server ? smtpLine(res.server) : "no SMTP server is named\n");
  });
}
