// `krane member list|add|remove|set-role` and `krane service-account create|list|delete`: a
// workspace's members (invited by email address) and service accounts (owners of CI tokens),
// each with a role (viewer, developer, admin, owner), against ctrl's MemberService.
import { Option, type Command } from "commander";
import { when, workspaceCommand } from "./command.js";

const ROLE = new Option("--role <role>", "viewer, developer, admin or owner").makeOptionMandatory();

export function registerMemberCommands(program: Command): void {
  const members = program.command("member").description("a workspace's members and their roles");
  workspaceCommand(members.command("list").description("list the workspace's members"), async (x) => {
    const workspace = await x.ctrl.workspace();
    const api = x.ctrl.client(x.access.MemberService);
    const res = await x.ctrl.allPages("members", (page) => api.listMembers({ workspace, ...page }));
    if (x.json) x.printJson(x.access.ListMembersResponseSchema, res);
    else
      x.printTable(
        ["EMAIL", "ROLE", "STATE", "NAME", "JOINED"],
        res.members.map((m) => [m.email, m.role, m.state, m.name === "" ? "-" : m.name, when(m.joinedAtUnixMs)]),
      );
  });
  workspaceCommand(
    members.command("add <email>").description("invite an email address with a role").addOption(ROLE),
    async (x, email: string, opts: { role: string }) => {
      const workspace = await x.ctrl.workspace();
      const { member } = await x.ctrl
        .client(x.access.MemberService)
        .inviteMember({ workspace, email, role: opts.role });
      if (!member) return;
      if (x.json) x.printJson(x.access.MemberSchema, member);
      else process.stdout.write(`invited ${member.email} as ${member.role} to workspace ${workspace}\n`);
    },
  );
  workspaceCommand(
    members.command("set-role <member> <role>").description("change a member's role (by email or id)"),
    async (x, member: string, role: string) => {
      const workspace = await x.ctrl.workspace();
      const res = await x.ctrl.client(x.access.MemberService).setMemberRole({ workspace, member, role });
      if (!res.member) return;
      if (x.json) x.printJson(x.access.MemberSchema, res.member);
      else process.stdout.write(`${res.member.email} is now ${res.member.role}\n`);
    },
  );
  workspaceCommand(
    members.command("remove <member>").description("remove a member or an invitation, and revoke their tokens"),
    async (x, member: string) => {
      const workspace = await x.ctrl.workspace();
      const res = await x.ctrl.client(x.access.MemberService).removeMember({ workspace, member });
      if (!res.member) return;
      if (x.json) x.printJson(x.access.MemberSchema, res.member);
      else process.stdout.write(`removed ${res.member.email} from workspace ${workspace}\n`);
    },
  );

  const accounts = program
    .command("service-account")
    .description("a workspace's service accounts (owners of CI tokens)");
  workspaceCommand(
    accounts.command("create <name>").description("create a service account with a role").addOption(ROLE),
    async (x, name: string, opts: { role: string }) => {
      const workspace = await x.ctrl.workspace();
      const { serviceAccount } = await x.ctrl
        .client(x.access.MemberService)
        .createServiceAccount({ workspace, name, role: opts.role });
      if (!serviceAccount) return;
      if (x.json) x.printJson(x.access.ServiceAccountSchema, serviceAccount);
      else process.stdout.write(`created service account ${serviceAccount.name} (${serviceAccount.role})\n`);
    },
  );
  workspaceCommand(accounts.command("list").description("list the workspace's service accounts"), async (x) => {
    const workspace = await x.ctrl.workspace();
    const api = x.ctrl.client(x.access.MemberService);
    const res = await x.ctrl.allPages("serviceAccounts", (page) => api.listServiceAccounts({ workspace, ...page }));
    if (x.json) x.printJson(x.access.ListServiceAccountsResponseSchema, res);
    else
      x.printTable(
        ["NAME", "ROLE", "CREATED"],
        res.serviceAccounts.map((s) => [s.name, s.role, when(s.createdAtUnixMs)]),
      );
  });
  workspaceCommand(
    accounts.command("delete <name>").description("delete a service account and revoke its tokens"),
    async (x, name: string) => {
      const workspace = await x.ctrl.workspace();
      const res = await x.ctrl.client(x.access.MemberService).deleteServiceAccount({ workspace, name });
      if (!res.serviceAccount) return;
      if (x.json) x.printJson(x.access.ServiceAccountSchema, res.serviceAccount);
      else process.stdout.write(`deleted service account ${res.serviceAccount.name}\n`);
    },
  );
}
