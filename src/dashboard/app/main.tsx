/** @jsxRuntime automatic @jsxImportSource preact */
// krane's web dashboard: sign-in, then the overview, an environment's pages, the audit log and
// a workspace's quotas.
// Every figure comes from the public API through api.ts; what the pages show is pushed by ctrl's
// LiveService streams (live.ts), never polled. The bundle's entry (scripts/build.mjs), in a folder
// of its own: it imports the views, and they import the shared modules of ../, so beside those it
// would make a folder cycle.
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { signOut, whoAmI, type Me, type SignedOut } from "../api.js";
import { RoleContext } from "../permissions.js";
import { routeKey, useRoute } from "../router.js";
import { Audit } from "../views/audit.js";
import { EnvironmentPage } from "../views/environment/page.js";
import { Overview } from "../views/overview.js";
import { Quotas } from "../views/quotas.js";
import { SignIn } from "../views/sign-in.js";

function App() {
  const [me, setMe] = useState<Me | SignedOut | null>(null);
  const route = useRoute();
  const check = () => void whoAmI().then(setMe);
  useEffect(check, []);
  if (me === null) return <p class="muted">Loading…</p>;
  if ("signedOut" in me) return <SignIn oidc={me.oidc} onDone={check} />;
  return (
    <RoleContext.Provider value={me.role}>
      <header>
        <h1>krane</h1>
        <nav aria-label="Main">
          <a href="#/" aria-current={route.page === "overview" ? "page" : undefined}>
            Overview
          </a>
          <a href="#/audit" aria-current={route.page === "audit" ? "page" : undefined}>
            Audit log
          </a>
          <a href="#/quotas" aria-current={route.page === "quotas" ? "page" : undefined}>
            Quotas
          </a>
        </nav>
        <span class="muted">
          signed in as {me.name}
          {me.workspace ? ` (workspace ${me.workspace.slug})` : ""}
          {me.role ? ` · ${me.role}` : ""}
        </span>
        <button
          type="button"
          onClick={() =>
            void signOut().then(() => {
              location.hash = "#/";
              check();
            })
          }
        >
          Sign out
        </button>
      </header>
      {/* Keyed by what the route names: another environment or chain is a new page, with none of
          the last one's state. */}
      {route.page === "env" ? (
        <EnvironmentPage key={routeKey(route)} {...route.env} tab={route.tab} />
      ) : route.page === "audit" ? (
        <Audit key={routeKey(route)} chain={route.chain} installation={me.workspace === null} />
      ) : route.page === "quotas" ? (
        <Quotas key={routeKey(route)} workspace={route.workspace} />
      ) : (
        <Overview installation={me.workspace === null} />
      )}
    </RoleContext.Provider>
  );
}

const root = document.getElementById("app");
if (root) render(<App />, root);
