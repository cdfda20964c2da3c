/** @jsxRuntime automatic @jsxImportSource preact */
// The policies tab: the environment's edge policies in the order every sentinel checks them
// (PolicyService.ListPolicies, with the routing version that carries them), adding one from a form
// and removing one (asked first); ctrl's refusal shows under the form, naming the field. Adding and
// removing are hidden from a role that may not, with a line saying why.
import { useContext, useEffect, useState } from "preact/hooks";
import { PolicyService, type ListPoliciesResponse } from "../../../gen/krane/ctrl/v1/exposure_pb.js";
import { api, errorText } from "../../api.js";
import { removeColumn, useConfirmedActions } from "../../components/confirm.js";
import { Table } from "../../components/table.js";
import { hiddenNote, RoleContext, useMayCall } from "../../permissions.js";
import type { EnvRef } from "../../router.js";
import { EMPTY_POLICY_FORM, POLICY_KINDS, policyRequest, type PolicyForm } from "./edge-model.js";

export function Policies(props: { envRef: EnvRef }) {
  const ref = props.envRef;
  const [listed, setListed] = useState<ListPoliciesResponse>();
  const [loadError, setLoadError] = useState("");
  const [version, setVersion] = useState(0);
  const [form, setForm] = useState<PolicyForm>(EMPTY_POLICY_FORM);
  const [addError, setAddError] = useState("");
  const { act, errors, dialog } = useConfirmedActions();
  const mayCall = useMayCall();
  const m = PolicyService.method;
  const hidden = hiddenNote(useContext(RoleContext), [
    ["Adding a policy", m.addPolicy],
    ["Removing a policy", m.removePolicy],
  ]);
  useEffect(() => {
    let live = true;
    api.policies.listPolicies(ref).then(
      (r) => live && (setListed(r), setLoadError("")),
      (err: unknown) => live && setLoadError(errorText(err)),
    );
    return () => {
      live = false;
    };
  }, [ref.workspace, ref.project, ref.environment, version]);
  const input = (key: keyof PolicyForm) => ({
    value: form[key],
    onInput: (e: { currentTarget: { value: string } }) => setForm({ ...form, [key]: e.currentTarget.value }),
    "aria-describedby": "policy-error",
  });
  const kind = form.kind;
  return (
    <>
      {hidden !== undefined && (
        <p class="muted" role="note">
          {hidden}
        </p>
      )}
      <h2>Edge policies</h2>
      {loadError && (
        <p class="error" role="alert">
          {loadError}
        </p>
      )}
      <p class="muted">
        Checked in this order by every sentinel of the environment before a request reaches an instance
        {listed ? ` (routing version ${listed.routingVersion})` : ""}.
      </p>
      <Table
        label="Edge policies"
        empty={
          <>
            No policy: every request goes on to an instance. Add one below or with{" "}
            <code>
              krane policy add {ref.project}/{ref.environment} --name … --kind …
            </code>
            .
          </>
        }
        rows={listed?.policies ?? []}
        rowKey={(p) => p.name}
        columns={[
          { key: "name", title: "Policy", value: (p) => p.name },
          { key: "kind", title: "Kind", value: (p) => p.kind.case ?? "" },
          { key: "summary", title: "What it does", value: (p) => p.summary, wrap: true },
          ...(mayCall(m.removePolicy)
            ? [
                removeColumn(
                  act,
                  (p: { name: string }) => `policy ${p.name}`,
                  (p) => api.policies.removePolicy({ ...ref, name: p.name }),
                  () => setVersion((v) => v + 1),
                ),
              ]
            : []),
        ]}
      />
      {errors.remove && (
        <p class="error" role="alert">
          {errors.remove}
        </p>
      )}
      {mayCall(m.addPolicy) && (
        <form
          class="actions"
          aria-label="Add a policy"
          onSubmit={(e) => {
            e.preventDefault();
            api.policies.addPolicy({ ...ref, policy: policyRequest(form) }).then(
              () => (setForm(EMPTY_POLICY_FORM), setAddError(""), setVersion((v) => v + 1)),
              (err: unknown) => setAddError(errorText(err)),
            );
          }}
        >
          <label>
            Name
            <input {...input("name")} required />
          </label>
          <label>
            Kind
            <select {...input("kind")}>
              {POLICY_KINDS.map((k) => (
                <option key={k}>{k}</option>
              ))}
            </select>
          </label>
          {kind === "ip" && (
            <>
              <label>
                Allow (CIDRs)
                <input {...input("allow")} />
              </label>
              <label>
                Deny (CIDRs)
                <input {...input("deny")} />
              </label>
            </>
          )}
          {kind === "limits" && (
            <>
              <label>
                Methods
                <input {...input("methods")} placeholder="GET POST" />
              </label>
              <label>
                Path prefixes
                <input {...input("pathPrefixes")} placeholder="/api" />
              </label>
            </>
          )}
          {kind === "ratelimit" && (
            <>
              <label>
                Per
                <select {...input("per")}>
                  {["address", "header", "jwt", "apikey"].map((k) => (
                    <option key={k}>{k}</option>
                  ))}
                </select>
              </label>
              <label>
                Limit
                <input {...input("limit")} type="number" min="1" step="1" required />
              </label>
              <label>
                Window (seconds)
                <input {...input("windowSeconds")} type="number" min="1" step="1" required />
              </label>
            </>
          )}
          {(kind === "apikey" || (kind === "ratelimit" && form.per === "header")) && (
            <label>
              Header
              <input {...input("header")} />
            </label>
          )}
          <button type="submit">Add policy</button>
          <span id="policy-error" class="error" role="alert">
            {addError}
          </span>
        </form>
      )}
      {dialog}
    </>
  );
}
