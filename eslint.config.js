// Lint rules for hand-written code; generated protobuf code (src/gen, test/gen) is left as generated.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["src/gen/**", "test/gen/**", "node_modules/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-constant-condition": ["error", { checkLoops: false }],
      // Prettier owns layout; it puts a long chain's `[Symbol.asyncIterator]()` on its own line.
      "no-unexpected-multiline": "off",
    },
  },
);
