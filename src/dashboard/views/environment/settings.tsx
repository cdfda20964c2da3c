/** @jsxRuntime automatic @jsxImportSource preact */
// The config tab: the environment's configuration (values shown), its secrets (names only: a
// value is write-only, sent once and never shown again), and its endpoints and custom domains
// with their verification and readiness per region. Setting or removing a value makes a new
// revision, rolled out like a deploy; each change asks first and shows ctrl's refusal next to
// its field. Changes the session's role may not make are hidden, with a line saying why.
import { useContext, useState } from "preact/hooks";
import { ConfigService } from "../../../gen/krane/ctrl/v1/config_pb.js";
import type { EnvironmentView } from "../../../gen/krane/ctrl/v1/live_pb.js";
import { api } from "../../api.js";
import { Toned } from "../../components/badge.js";
import { useConfirmedActions } from "../../components/confirm.js";
import { Table, type Column } from "../../components/table.js";
import { ago } from "../../format.js";
import { hiddenNote, RoleContext, useMayCall } from "../../permissions.js";
import type { EnvRef } from "../../router.js";
import { httpsPerRegion, readinessPerRegion, secretSource } from "./settings-model.js";

export function Settings(props: { envRef: EnvRef; view: EnvironmentView }) {
  const ref = props.envRef;
  const { act, errors, dialog } = useConfirmedActions();
  const [configKey, setConfigKey] = useState("");
  const [configValue, setConfigValue] = useState("");
  const [secretKey, setSecretKey] = useState("");
  const ask = (title: string, field: string, run: () => Promise<unknown>) => act({ title, field, run });
  const mayCall = useMayCall();
  const m = ConfigService.method;
  const hidden = hiddenNote(useContext(RoleContext), [
    ["Setting a value", m.setConfig],
    ["Removing a value", m.unsetConfig],
    ["Setting a secret", m.setSecrets],
    ["Removing a secret", m.unsetSecrets],
  ]);
  // The last columns of a stored key, a config value's or a secret's alike: when it last changed,
  // and removing it (a new revision, asked first; a refusal shows next to `field`).
  const keyColumns = (
    name: (key: string) => string,
    field: string,
    unset: (keys: string[]) => Promise<unknown>,
    mayUnset: boolean,
  ): Column<{ key: string; updatedAtUnixMs: bigint }>[] => [
    {
      key: "updated",
      title: "Updated",
      value: (r) => Number(r.updatedAtUnixMs),
      render: (r) => ago(r.updatedAtUnixMs),
    },
    ...(mayUnset ? [removeColumn(name, field, unset)] : []),
  ];
  const removeColumn = (
    name: (key: string) => string,
    field: string,
    unset: (keys: string[]) => Promise<unknown>,
  ): Column<{ key: string; updatedAtUnixMs: bigint }> => ({
    key: "unset",
    title: "Remove",
    value: () => "",
    render: (r) => (
      <button
        type="button"
        aria-label={`Remove ${name(r.key)}`}
        onClick={() => ask(`Remove ${name(r.key)} (a new revision)`, field, () => unset([r.key]))}
      >
        Remove
      </button>
    ),
  });
  const status = props.view.status;
  return (
    <>
      {hidden !== undefined && (
        <p class="muted" role="note">
          {hidden}
        </p>
      )}
      <h2>Configuration</h2>
      <Table
        label="Configuration"
        empty={
          <>
            No configuration value: set one with <code>krane config set &lt;project/env&gt; KEY=value</code>.
          </>
        }
        rows={props.view.config}
        rowKey={(c) => c.key}
        columns={[
          { key: "key", title: "Key", value: (c) => c.key },
          { key: "value", title: "Value", value: (c) => c.value },
          ...keyColumns(
            (key) => key,
            "config",
            (keys) => api.config.unsetConfig({ ...ref, keys }),
            mayCall(m.unsetConfig),
          ),
        ]}
      />
      {mayCall(m.setConfig) && (
        <form
          class="actions"
          onSubmit={(e) => {
            e.preventDefault();
            const key = configKey.trim();
            const value = configValue;
            ask(`Set ${key} (a new revision)`, "config", () =>
              api.config.setConfig({ ...ref, values: [{ key, value }] }),
            );
          }}
        >
          <label>
            Key
            <input
              value={configKey}
              onInput={(e) => setConfigKey(e.currentTarget.value)}
              required
              aria-describedby="config-error"
            />
          </label>
          <label>
            Value
            <input
              value={configValue}
              onInput={(e) => setConfigValue(e.currentTarget.value)}
              aria-describedby="config-error"
            />
          </label>
          <button type="submit">Set</button>
          <span id="config-error" class="error" role="alert">
            {errors.config ?? ""}
          </span>
        </form>
      )}

      <h2>Secrets</h2>
      <p class="muted">Names only: a secret's value is write-only and never shown.</p>
      <Table
        label="Secrets"
        empty={
          <>
            No secret: set one with <code>krane secret set &lt;project/env&gt; KEY</code> (the value is read from the
            terminal).
          </>
        }
        rows={props.view.secrets}
        rowKey={(s) => s.key}
        columns={[
          { key: "key", title: "Name", value: (s) => s.key },
          {
            key: "source",
            title: "Source",
            value: secretSource,
          },
          ...keyColumns(
            (key) => `secret ${key}`,
            "secret",
            (keys) => api.config.unsetSecrets({ ...ref, keys }),
            mayCall(m.unsetSecrets),
          ),
        ]}
      />
      {mayCall(m.setSecrets) && (
        <form
          class="actions"
          onSubmit={(e) => {
            e.preventDefault();
            const form = e.currentTarget;
            const field = form.elements.namedItem("secret-value") as HTMLInputElement;
            const value = field.value;
            // The value leaves the page as soon as it is taken.
            field.value = "";
            const key = secretKey.trim();
            ask(`Set secret ${key} (a new revision)`, "secret", () =>
              api.config.setSecrets({ ...ref, secrets: [{ key, source: { case: "value", value } }] }),
            );
          }}
        >
          <label>
            Name
            <input
              value={secretKey}
              onInput={(e) => setSecretKey(e.currentTarget.value)}
              required
              aria-describedby="secret-error"
            />
          </label>
          <label>
            Value (write-only)
            <input name="secret-value" type="password" autocomplete="off" required aria-describedby="secret-error" />
          </label>
          <button type="submit">Set secret</button>
          <span id="secret-error" class="error" role="alert">
            {errors.secret ?? ""}
          </span>
        </form>
      )}

      <h2>Endpoints</h2>
      <Table
        label="Endpoints"
        empty={
          <>
            No endpoint: expose the environment with <code>krane endpoint set &lt;project/env&gt;</code>.
          </>
        }
        rows={status?.endpoints ?? []}
        rowKey={(e) => e.endpoint?.id ?? ""}
        columns={[
          { key: "vis", title: "Visibility", value: (e) => e.endpoint?.visibility ?? "" },
          {
            key: "url",
            title: "URL",
            value: (e) => e.endpoint?.url ?? "",
          },
          {
            key: "ready",
            title: "Per region",
            value: (e) => readinessPerRegion(e.regions),
          },
          { key: "https", title: "HTTPS listener", value: (e) => httpsPerRegion(e.regions) },
        ]}
      />
      <h2>Custom domains</h2>
      <Table
        label="Custom domains"
        empty={
          <>
            No custom domain: add one with <code>krane domain add &lt;project/env&gt; &lt;hostname&gt;</code>.
          </>
        }
        rows={status?.domains ?? []}
        rowKey={(d) => d.domain?.id ?? ""}
        columns={[
          { key: "host", title: "Hostname", value: (d) => d.domain?.hostname ?? "" },
          {
            key: "state",
            title: "Verification",
            value: (d) => d.domain?.state ?? "",
            render: (d) => <Toned tone={d.domain?.state === "verified" ? "ok" : "warn"}>{d.domain?.state}</Toned>,
          },
          {
            key: "txt",
            title: "TXT record",
            value: (d) => (d.domain ? `${d.domain.txtName} = ${d.domain.txtValue}` : ""),
          },
          { key: "err", title: "Last error", value: (d) => d.domain?.lastError ?? "" },
          {
            key: "checked",
            title: "Checked",
            value: (d) => Number(d.domain?.lastCheckedAtUnixMs ?? 0),
            render: (d) => ago(d.domain?.lastCheckedAtUnixMs ?? 0),
          },
          {
            key: "ready",
            title: "Per region",
            value: (d) => readinessPerRegion(d.regions),
          },
          { key: "https", title: "HTTPS listener", value: (d) => httpsPerRegion(d.regions) },
        ]}
      />
      {dialog}
    </>
  );
}
