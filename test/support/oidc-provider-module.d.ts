// The little of `oidc-provider` (which ships no types) that test/support/oidc-provider.ts uses.
declare module "oidc-provider" {
  import type { IncomingMessage, ServerResponse } from "node:http";

  export interface KoaContext {
    path: string;
    body: unknown;
  }

  export interface Configuration {
    clients: Record<string, unknown>[];
    jwks: { keys: object[] };
    claims: Record<string, string[]>;
    conformIdTokenClaims?: boolean;
    pkce?: { required: () => boolean };
    findAccount: (
      ctx: KoaContext,
      sub: string,
    ) => { accountId: string; claims: () => Record<string, unknown> } | undefined;
  }

  export default class Provider {
    constructor(issuer: string, configuration: Configuration);
    use(middleware: (ctx: KoaContext, next: () => Promise<void>) => Promise<void>): void;
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
  }
}
