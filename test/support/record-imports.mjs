// `node --import ./test/support/record-imports.mjs …` appends the URL of every module the
// process loads to the file named by RECORD_IMPORTS (for the CLI's lazy-loading test).
import { register } from "node:module";

register("./record-imports-hooks.mjs", import.meta.url);
