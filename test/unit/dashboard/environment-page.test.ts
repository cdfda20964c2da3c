// An environment's page rendered into the minimal DOM of ./dom.ts, from a given stream state and
// view (no ctrl: nothing here is confirmed, so no call is made): a refused stream shows ctrl's
// message and nothing that would act; the wait shows only that; the status tab offers its actions,
// a rollback to every revision but the target, and a rollback's diff before it asks.
import "./dom.js";
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { EnvironmentBody } from "../../../src/dashboard/views/environment/page.js";
import { Settings } from "../../../src/dashboard/views/environment/settings.js";
import { button, buttons, byTag, cells, fire, h, mount, the, type FakeElement } from "./dom.js";
import { environmentView, PROD } from "./fixtures.js";

describe("environment page", () => {
  it("shows a refusal alone: ctrl's message, the stopped badge, the tabs, no table and no action", async () => {
    const { root, unmount } = await mount(
      h(EnvironmentBody, {
        envRef: { ...PROD, environment: "doesnotexist" },
        tab: "status",
        state: "stopped",
        error: "environment acme/shop/doesnotexist not found",
        view: undefined,
      }),
    );
    const main = byTag(root, "main")[0] as FakeElement;
    assert.match(main.textContent, /acme \/ shop\/doesnotexist/);
    assert.equal(the(root, "p", ["role", "alert"]).textContent, "environment acme/shop/doesnotexist not found");
    assert.equal(the(root, "span", ["role", "status"]).textContent, "stopped");
    assert.doesNotMatch(main.textContent, /Loading…/);
    assert.equal(byTag(root, "table").length, 0);
    assert.deepEqual(buttons(root), [], "nothing acts on the missing environment");
    assert.deepEqual(
      byTag(the(root, "nav", ["aria-label", "Environment"]), "a").map((a) => a.getAttribute("href")),
      ["status", "events", "logs", "requests", "policies", "charts", "builds", "config"].map(
        (t) => `#/env/acme/shop/doesnotexist/${t}`,
      ),
    );
    await unmount();
  });

  it("shows the wait alone until the first view arrives, even with an old view's tab asked for", async () => {
    const { root, unmount } = await mount(
      h(EnvironmentBody, { envRef: PROD, tab: "config", state: "connecting", error: "", view: undefined }),
    );
    assert.match(root.textContent, /Loading…/);
    assert.deepEqual(buttons(root), []);
    assert.equal(byTag(root, "table").length, 0);
    // The tab asked for is the current one in the menu.
    assert.deepEqual(
      byTag(root, "a")
        .filter((a) => a.getAttribute("aria-current") === "page")
        .map((a) => a.textContent),
      ["Config and domains"],
    );
    await unmount();
  });

  it("offers the status tab's actions, and a rollback to every revision but the rollout's target", async () => {
    const { root, unmount } = await mount(
      h(EnvironmentBody, { envRef: PROD, tab: "status", state: "live", error: "", view: environmentView() }),
    );
    assert.deepEqual(buttons(root), [
      "Deploy",
      "Scale",
      "Pause",
      "Resume",
      "Promote",
      "Abort",
      "Restart",
      "Roll back to revision 3",
      "Roll back to revision 1",
    ]);
    assert.deepEqual(
      cells(root, "Revisions")
        .slice(1)
        .map((r) => [r[0], r[4]]),
      [
        ["3", "Roll back"],
        ["2", "target"],
        ["1", "Roll back"],
      ],
    );
    // The deploy's hint is the target's image; scaling offers every region with its replicas now.
    assert.equal(the(root, "input", ["name", "image"]).getAttribute("placeholder"), "registry.example.com/shop:2.0");
    assert.deepEqual(
      byTag(root, "option").map((o) => o.textContent),
      ["every region", "eu-west (now 2)", "us-east (now 1)"],
    );
    // The canary is at its second step; the sentinel serves an older routing version than desired.
    assert.deepEqual(
      byTag(the(root, "ol", ["aria-label", "Canary steps"]), "li").map((li) => [
        li.textContent,
        li.getAttribute("aria-current"),
      ]),
      [
        ["weight 20 %", null],
        ["pause until promoted ← now", "step"],
        ["analysis", null],
        ["pause 30 s", null],
      ],
    );
    assert.deepEqual(cells(root, "Traffic weights")[1], ["eu-west", "r3 80%, r2 20%"]);
    assert.deepEqual(cells(root, "Measurements behind the verdict")[1]?.slice(0, 6), [
      "canary r2",
      "100",
      "10",
      "90.0 %",
      "≤ 5 ms",
      "> 30 s",
    ]);
    const routing = byTag(the(root, "table", ["aria-label", "Sentinels"]), "td")[2]?.childNodes[0] as FakeElement;
    assert.equal(routing.getAttribute("class"), "warn");
    assert.equal(routing.textContent, "◐ 4/5"); // the tone's shape, then the figures
    const [, running, failed] = cells(root, "Instances");
    assert.deepEqual(running, ["eu-west", "web-a", "2", "✓ running", "", "node-1"]);
    assert.deepEqual(failed?.slice(0, 4), ["eu-west", "web-b", "2", "◐ failed"]);
    assert.match(failed?.[4] ?? "", /^OOMKilled \(exit 137\) \d+[smhd] ago$/);
    await unmount();
  });

  it("asks before a rollback, showing what it changes; cancelled, nothing is left open", async () => {
    const { root, unmount } = await mount(
      h(EnvironmentBody, { envRef: PROD, tab: "status", state: "live", error: "", view: environmentView() }),
    );
    await fire(button(root, "Roll back to revision 3"), "click");
    const dialog = the(root, "dialog", ["aria-label", "Roll back to revision 3"]);
    const diff = cells(dialog, "What the rollback changes");
    assert.deepEqual(diff[0], ["Field", "Now (r2)", "After (r3)"]);
    assert.deepEqual(diff.slice(1), [
      ["image", "registry.example.com/shop:2.0", "registry.example.com/shop:3.0"],
      ["command", "node server.js", ""],
      ["port", "8080", "8080"],
      ["environment variables", "", "A, B"],
      ["config", "", "LOG_LEVEL=debug"],
      ["secret names", "", "API_KEY"],
    ]);
    // What changes is marked.
    const after = byTag(the(dialog, "table", ["aria-label", "What the rollback changes"]), "td")
      .filter((_, i) => i % 3 === 2)
      .map((td) => td.getAttribute("class"));
    assert.deepEqual(after, ["changed", "changed", "", "changed", "changed", "changed"]);
    await fire(button(dialog, "Cancel"), "click");
    assert.equal(byTag(root, "dialog").length, 0);
    await unmount();
  });

  it("asks before a deploy, naming the image typed", async () => {
    const { root, unmount } = await mount(
      h(EnvironmentBody, { envRef: PROD, tab: "status", state: "live", error: "", view: environmentView() }),
    );
    await fire(the(root, "input", ["name", "image"]), "input", "  registry.example.com/shop:4.0 ");
    await fire(byTag(root, "form")[0] as FakeElement, "submit");
    const dialog = the(root, "dialog", ["aria-label", "Deploy registry.example.com/shop:4.0"]);
    assert.match(dialog.textContent, /rolls out to every region/);
    await unmount();
  });
});

describe("config tab", () => {
  it("shows configuration with values and secrets by name only, each removable after asking", async () => {
    const { root, unmount } = await mount(h(Settings, { envRef: PROD, view: environmentView() }));
    assert.deepEqual(cells(root, "Configuration")[1]?.slice(0, 2), ["LOG_LEVEL", "debug"]);
    assert.deepEqual(cells(root, "Secrets")[1]?.slice(0, 2), ["API_KEY", "value"]);
    await fire(button(root, "Remove secret API_KEY"), "click");
    the(root, "dialog", ["aria-label", "Remove secret API_KEY (a new revision)"]);
    await unmount();
  });

  it("takes a secret's value out of the page as soon as it is set", async () => {
    const { root, unmount } = await mount(h(Settings, { envRef: PROD, view: environmentView() }));
    const forms = byTag(root, "form");
    const secretForm = forms[1] as FakeElement;
    const value = the(secretForm, "input", ["name", "secret-value"]);
    assert.equal(value.getAttribute("type"), "password");
    await fire(byTag(secretForm, "input")[0] as FakeElement, "input", "API_KEY");
    await fire(value, "input", "s3cret-value");
    await fire(secretForm, "submit");
    assert.equal((value as FakeElement & { value: string }).value, "");
    const dialog = the(root, "dialog", ["aria-label", "Set secret API_KEY (a new revision)"]);
    assert.doesNotMatch(root.textContent + JSON.stringify([...dialog.attributes]), /s3cret-value/);
    await unmount();
  });
});
