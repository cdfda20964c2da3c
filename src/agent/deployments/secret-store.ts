// External secrets: this cluster's Secrets Store CSI provider (the agent's --secret-store-*
// settings), which revisions' and jobs' external secret references are mounted through.

/** The provider and its parameters, as the agent is configured with them. */
export interface SecretStoreSettings {
  readonly provider: string;
  readonly parameters: Readonly<Record<string, string>>;
}

/** What the deployment and job kinds are built with beside the runtime's KindEnv. */
export interface SecretStoreEnv {
  /** This cluster's Secrets Store CSI provider, for external secrets (absent: none). */
  readonly secretStore?: SecretStoreSettings;
}
