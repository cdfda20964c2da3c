// What the dashboard lets a role do, read from the same proto declarations ctrl enforces
// (src/dashboard/permissions.ts against src/ctrl/auth/roles-table.ts's needs over every public
// service), and the status and config tabs drawn for a viewer: no deploy, scale, rollout action,
// rollback or configuration change, and a line saying which role they need.
import "./dom.js";
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { API_SERVICES } from "../../../src/client/services.js";
import { needs } from "../../../src/ctrl/auth/roles-table.js";
import { DeploymentService } from "../../../src/gen/krane/ctrl/v1/api_pb.js";
import { RolloutService } from "../../../src/gen/krane/ctrl/v1/rollout_pb.js";
import { hiddenNote, needOf, refusalOf, RoleContext } from "../../../src/dashboard/permissions.js";
import { EnvironmentBody } from "../../../src/dashboard/views/environment/page.js";
import { Settings } from "../../../src/dashboard/views/environment/settings.js";
import { buttons, byTag, cells, h, mount, the } from "./dom.js";
import { environmentView, PROD } from "./fixtures.js";

describe("dashboard permissions", () => {
  it("needs for every public method what ctrl enforces", () => {
    const services = Object.values(API_SERVICES);
    const ctrlNeeds = needs(services);
    let n = 0;
    for (const s of services)
      for (const m of s.methods) {
        assert.equal(needOf(m), ctrlNeeds.get(`${s.name}/${m.name}`), `${s.name}/${m.name}`);
        n++;
      }
    assert.ok(n > 50, `every method checked (${n})`);
  });

  it("refuses by role rank, naming the role needed; an installation token may do everything", () => {
    const deploy = DeploymentService.method.createDeployment;
    assert.equal(refusalOf("viewer", deploy), "CreateDeployment needs the developer role (you are a viewer)");
    assert.equal(refusalOf("developer", deploy), undefined);
    assert.equal(refusalOf("owner", deploy), undefined);
    assert.equal(refusalOf(null, deploy), undefined);
    assert.equal(
      hiddenNote("viewer", [
        ["Deploy", deploy],
        ["Roll back", RolloutService.method.undo],
        ["Status", RolloutService.method.getRolloutStatus],
      ]),
      "Deploy and Roll back need the developer role; you are a viewer.",
    );
    assert.equal(hiddenNote("developer", [["Deploy", deploy]]), undefined);
  });

  it("shows a viewer no action on the status tab, and says which role they need", async () => {
    const body = h(EnvironmentBody, { envRef: PROD, tab: "status", state: "live", error: "", view: environmentView() });
    const viewer = await mount(h(RoleContext.Provider, { value: "viewer" }, body));
    assert.deepEqual(buttons(viewer.root), [], "no deploy, scale, rollout action or rollback");
    assert.equal(
      the(viewer.root, "p", ["role", "note"]).textContent,
      "Deploy, Scale, Pause, Resume, Promote, Abort, Restart and Roll back need the developer role; you are a viewer.",
    );
    await viewer.unmount();
    const developer = await mount(h(RoleContext.Provider, { value: "developer" }, body));
    assert.ok(buttons(developer.root).includes("Deploy"));
    assert.ok(buttons(developer.root).some((b) => b.startsWith("Roll back to revision")));
    await developer.unmount();
  });

  it("shows a viewer the configuration and secret names, but no change, and says why", async () => {
    const view = environmentView();
    const viewer = await mount(h(RoleContext.Provider, { value: "viewer" }, h(Settings, { envRef: PROD, view })));
    assert.deepEqual(cells(viewer.root, "Configuration")[1]?.slice(0, 2), ["LOG_LEVEL", "debug"]);
    assert.deepEqual(buttons(viewer.root), [], "no Set, Set secret or Remove");
    assert.equal(byTag(viewer.root, "form").length, 0);
    assert.equal(
      the(viewer.root, "p", ["role", "note"]).textContent,
      "Setting a value, Removing a value, Setting a secret and Removing a secret need the developer role; you are a viewer.",
    );
    await viewer.unmount();
    const developer = await mount(h(RoleContext.Provider, { value: "developer" }, h(Settings, { envRef: PROD, view })));
    assert.ok(buttons(developer.root).includes("Remove secret API_KEY"));
    assert.equal(byTag(developer.root, "form").length, 2);
    await developer.unmount();
  });
});
