// krane's web dashboard: sign-in, then the overview, an environment's pages and the audit log.
// Every figure comes from the public API through api.ts; what the pages show is pushed by ctrl's
// LiveService streams (live.tsx), never polled.
import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { signIn, signOut, whoAmI, type Me } from "./api.js";
import { Audit } from "./audit.js";
import { EnvironmentPage } from "./environment.js";
import { Overview } from "./overview.js";
import { routeKey, useRoute } from "./router.js";

function SignIn(props: { onDone: () => void }) {
  const [error, setError] = useState("");
  const input = useRef<HTMLInputElement>(null);
  return (
    <main class="signin">
      <h1>Sign in to krane</h1>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          const field = input.current;
          if (!field) return;
          const token = field.value;
          // The token leaves the page's memory as soon as it is sent.
          field.value = "";
          const refused = await signIn(token);
          if (refused) setError(refused);
          else props.onDone();
        }}
      >
        <label>
          API token
          <input ref={input} name="token" type="password" autocomplete="off" required aria-describedby="signin-error" />
        </label>
        <p id="signin-error" class="error" role="alert">
          {error}
        </p>
        <button class="primary" type="submit">
          Sign in
        </button>
      </form>
      <p class="muted">
        Use an API token (KRANE_TOKEN); a workspace token shows only its workspace. The browser keeps only a session
        cookie.
      </p>
    </main>
  );
}

function App() {
  const [me, setMe] = useState<Me | undefined | null>(null);
  const route = useRoute();
  const check = () => void whoAmI().then(setMe);
  useEffect(check, []);
  if (me === null) return <p class="muted">Loading…</p>;
  if (me === undefined) return <SignIn onDone={check} />;
  return (
    <>
      <header>
        <h1>krane</h1>
        <nav aria-label="Main">
          <a href="#/" aria-current={route.page === "overview" ? "page" : undefined}>
            Overview
          </a>
          <a href="#/audit" aria-current={route.page === "audit" ? "page" : undefined}>
            Audit log
          </a>
        </nav>
        <span class="muted">
          signed in as {me.name}
          {me.workspace ? ` (workspace ${me.workspace.slug})` : ""}
        </span>
        <button
          type="button"
          onClick={() =>
            void signOut().then(() => {
              location.hash = "#/";
              setMe(undefined);
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
        <Audit key={routeKey(route)} workspace={route.chain} installation={me.workspace === null} />
      ) : (
        <Overview installation={me.workspace === null} />
      )}
    </>
  );
}

const root = document.getElementById("app");
if (root) render(<App />, root);
