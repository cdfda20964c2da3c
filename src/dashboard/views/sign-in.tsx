/** @jsxRuntime automatic @jsxImportSource preact */
// The sign-in page: through the installation's OpenID provider when ctrl has one (a link to
// ctrl's start of that sign-in: ctrl takes the provider's answer itself, the page never sees a
// token), or an API token, traded by ctrl for a session cookie; the page keeps nothing.
import { useRef, useState } from "preact/hooks";
import { signIn } from "../api.js";

/** The provider as a person knows it: its host name. */
export function providerName(issuer: string): string {
  try {
    return new URL(issuer).host;
  } catch {
    return issuer;
  }
}

/** Where the provider's sign-in starts, for a workspace slug or none (ctrl then finds the member's only one). */
export function providerSignInHref(workspace: string): string {
  const w = workspace.trim();
  return w === "" ? "/auth/oidc/dashboard" : `/auth/oidc/dashboard?workspace=${encodeURIComponent(w)}`;
}

function ProviderSignIn(props: { issuer: string }) {
  const [workspace, setWorkspace] = useState("");
  const onInput = (e: { currentTarget: HTMLInputElement }) => setWorkspace(e.currentTarget.value);
  return (
    <section aria-label="Single sign-on">
      <label>
        Workspace (only for a member of several)
        <input name="workspace" autocomplete="off" value={workspace} onInput={onInput} />
      </label>
      {/* A link, not a form: the page's CSP allows no form submission. */}
      <a class="button primary" href={providerSignInHref(workspace)}>
        Sign in with {providerName(props.issuer)}
      </a>
    </section>
  );
}

export function SignIn(props: { oidc: { issuer: string } | null; onDone: () => void }) {
  const [error, setError] = useState("");
  const input = useRef<HTMLInputElement>(null);
  return (
    <main class="signin">
      <h1>Sign in to krane</h1>
      {props.oidc ? <ProviderSignIn issuer={props.oidc.issuer} /> : null}
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
