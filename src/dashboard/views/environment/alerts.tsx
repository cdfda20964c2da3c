/** @jsxRuntime automatic @jsxImportSource preact */
// The charts tab's alert rules (AlertService): each rule with its state, adding one from a form and
// removing one (asked first); ctrl's refusal shows under the form, naming the field. The list is
// read again when the live view says a newer measurement was stored (a rule's state follows the
// minutes) and after each change.
import { useEffect, useState } from "preact/hooks";
import type { ListAlertRulesResponse } from "../../../gen/krane/ctrl/v1/alerts_pb.js";
import { api, errorText } from "../../api.js";
import { Toned } from "../../components/badge.js";
import { removeColumn, useConfirmedActions } from "../../components/confirm.js";
import { Table } from "../../components/table.js";
import { ago } from "../../format.js";
import type { EnvRef } from "../../router.js";
import { ALERT_METRIC_CHOICES, EMPTY_ALERT_FORM, alertRequest, type AlertForm } from "./alerts-model.js";
import { alertRows } from "./charts-model.js";

export function AlertRules(props: { envRef: EnvRef; through: bigint }) {
  const { workspace, project, environment } = props.envRef;
  const [rules, setRules] = useState<ListAlertRulesResponse>();
  const [loadError, setLoadError] = useState("");
  const [version, setVersion] = useState(0);
  const [form, setForm] = useState<AlertForm>(EMPTY_ALERT_FORM);
  const [addError, setAddError] = useState("");
  const [busy, setBusy] = useState(false);
  const { act, errors, dialog } = useConfirmedActions();
  useEffect(() => {
    let live = true;
    api.alerts
      .listAlertRules({ workspace, project, environment })
      .then((r) => live && (setRules(r), setLoadError("")))
      .catch((err: unknown) => live && setLoadError(errorText(err)));
    return () => {
      live = false;
    };
  }, [workspace, project, environment, props.through, version]);
  const reload = () => setVersion((v) => v + 1);
  const field = (key: keyof AlertForm) => ({
    value: form[key],
    onInput: (e: { currentTarget: { value: string } }) => setForm({ ...form, [key]: e.currentTarget.value }),
    "aria-describedby": "alert-error",
  });
  return (
    <>
      <h2>Alert rules</h2>
      {loadError && (
        <p class="error" role="alert">
          {loadError}
        </p>
      )}
      <Table
        label="Alert rules"
        empty={
          <>
            No alert rule: add one with the form below (a name, a metric and its bound), or with{" "}
            <code>
              krane alert add {project}/{environment} &lt;name&gt; --metric error_rate --above 2 --for 5m
            </code>
            .
          </>
        }
        rows={alertRows(rules?.rules ?? [])}
        rowKey={(r) => r.name}
        columns={[
          { key: "name", title: "Rule", value: (r) => r.name },
          { key: "condition", title: "Condition", value: (r) => r.condition },
          {
            key: "state",
            title: "State",
            value: (r) => r.state,
            render: (r) => <Toned tone={r.tone}>{r.state}</Toned>,
          },
          { key: "last", title: "Last minute", value: (r) => r.last },
          { key: "since", title: "Since", value: (r) => r.sinceMs, render: (r) => (r.sinceMs ? ago(r.sinceMs) : "") },
          removeColumn(
            act,
            (r: { name: string }) => `alert rule ${r.name}`,
            (r) => api.alerts.removeAlertRule({ workspace, project, environment, name: r.name }),
            reload,
          ),
        ]}
      />
      {errors.remove && (
        <p class="error" role="alert">
          {errors.remove}
        </p>
      )}
      <h3>Add a rule</h3>
      <form
        class="actions"
        aria-label="Add an alert rule"
        onSubmit={(e) => {
          e.preventDefault();
          setBusy(true);
          api.alerts
            .addAlertRule({ workspace, project, environment, ...alertRequest(form) })
            .then(
              () => (setForm(EMPTY_ALERT_FORM), setAddError(""), reload()),
              (err: unknown) => setAddError(errorText(err)),
            )
            .finally(() => setBusy(false));
        }}
      >
        <label>
          Name
          <input {...field("name")} required />
        </label>
        <label>
          Metric
          <select {...field("metric")}>
            {ALERT_METRIC_CHOICES.map((m) => (
              <option key={m.name} value={m.name}>
                {m.label}
              </option>
            ))}
          </select>
        </label>
        <label>
          Fires when
          <select {...field("side")}>
            <option value="above">above</option>
            <option value="below">below</option>
          </select>
        </label>
        <label>
          Bound
          <input {...field("threshold")} type="number" min="0" step="any" required />
        </label>
        <label>
          Over (minutes)
          <input {...field("windowMinutes")} type="number" min="1" max="60" step="1" required />
        </label>
        <label>
          For (minutes)
          <input {...field("forMinutes")} type="number" min="1" max="60" step="1" required />
        </label>
        <button type="submit" disabled={busy}>
          Add rule
        </button>
        <span id="alert-error" class="error" role="alert">
          {addError}
        </span>
      </form>
      {dialog}
    </>
  );
}
