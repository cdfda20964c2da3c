/** @jsxRuntime automatic @jsxImportSource preact */
// The sign-in page: an API token, traded by ctrl for a session cookie; the page keeps nothing.
import { useRef, useState } from "preact/hooks";
import { signIn } from "../api.js";

export function SignIn(props: { onDone: () => void }) {
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
