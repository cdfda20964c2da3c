// What to build from a source tree, and how (pure: a list of paths and a reader in, a plan out).
//
// A Dockerfile wins: the one the build names (`--dockerfile`), else `Dockerfile` at the root.
// Without one, the first language whose marker is at the root decides, in Railpack's order for
// the four krane knows: Go (go.mod), Python (requirements.txt or pyproject.toml), Node.js
// (package.json with a start script), then a static site (index.html). The plan carries a
// Dockerfile generated on krane's base images (src/contracts/builds.ts); what cannot be built
// is an error that names the file and says what to add.
import {
  BASE_USER,
  BUILT_IMAGE_PORT,
  GO_BASE,
  NODE_BASE,
  PYTHON_BASE,
  RUN_BASE,
  STATIC_SERVER,
  type BaseImage,
} from "../contracts/builds.js";

export interface SourceTree {
  /** Every file's path, relative to the root, with "/" between components. */
  readonly paths: readonly string[];
  /** A small file's text (the detector reads only manifests), undefined when absent or too big. */
  read(path: string): string | undefined;
}

export type Language = "dockerfile" | "go" | "python" | "node" | "static";

export interface BuildPlan {
  readonly language: Language;
  /** The Dockerfile's path in the source (a Dockerfile of the user's), else undefined. */
  readonly dockerfilePath: string | undefined;
  /** The generated Dockerfile (no Dockerfile of the user's), else undefined. */
  readonly dockerfile: string | undefined;
  /** The base images the build may name (all of them for a user's Dockerfile). */
  readonly bases: readonly BaseImage[];
  /** One sentence: what was found and what will run. */
  readonly summary: string;
}

/** A source that cannot be built as it is; `field` names what is wrong ("dockerfile", "source"). */
export class DetectError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

const ALL_BASES = [NODE_BASE, PYTHON_BASE, GO_BASE, RUN_BASE];

// The bases run as 65532, which cannot write /app, /opt or /root; the build steps run as root of
// their (isolated) step container and the image runs as BASE_USER again.
const BUILD_AS_ROOT = "USER 0:0";

/** A relative path inside the source ("./a/b" is "a/b"); undefined when it leaves the root or is empty. */
export function normalizePath(p: string): string | undefined {
  const parts: string[] = [];
  for (const c of p.replace(/\\/g, "/").split("/")) {
    if (c === "" || c === ".") continue;
    if (c === "..") return undefined;
    parts.push(c);
  }
  return parts.length === 0 ? undefined : parts.join("/");
}

interface PackageJson {
  scripts?: Record<string, unknown>;
  dependencies?: Record<string, unknown>;
  devDependencies?: Record<string, unknown>;
}

function parseJson<T>(text: string, file: string): T {
  try {
    const v = JSON.parse(text) as unknown;
    if (typeof v !== "object" || v === null || Array.isArray(v)) throw new Error("not an object");
    return v as T;
  } catch (err) {
    throw new DetectError(
      "source",
      `${file} is not a JSON object (${err instanceof Error ? err.message : String(err)})`,
    );
  }
}

/** A Dockerfile's JSON-array form of a command. */
function execForm(args: readonly string[]): string {
  return JSON.stringify(args);
}

function nodePlan(src: SourceTree, has: (p: string) => boolean): BuildPlan {
  const pkg = parseJson<PackageJson>(src.read("package.json") ?? "{}", "package.json");
  const scripts = pkg.scripts ?? {};
  if (typeof scripts.start !== "string" || scripts.start.trim() === "")
    throw new DetectError(
      "source",
      'package.json has no "start" script: add one (krane runs `npm start`), or a Dockerfile',
    );
  const deps = Object.keys(pkg.dependencies ?? {}).length + Object.keys(pkg.devDependencies ?? {}).length;
  const lock = ["package-lock.json", "npm-shrinkwrap.json"].find(has);
  const build = typeof scripts.build === "string" && scripts.build.trim() !== "";
  const lines = [`FROM ${NODE_BASE.name}`, BUILD_AS_ROOT, "WORKDIR /app"];
  if (deps > 0) {
    lines.push(`COPY ${["package.json", ...(lock ? [lock] : [])].join(" ")} ./`);
    // A lockfile installs exactly what it locks; the cache mount keeps npm's downloads between builds.
    lines.push(
      `RUN --mount=type=cache,id=npm,target=/root/.npm npm ${lock ? "ci" : "install"} --no-audit --no-fund${build ? "" : " --omit=dev"}`,
    );
  }
  lines.push("COPY . .");
  if (build) {
    lines.push("RUN npm run build");
    if (deps > 0) lines.push("RUN npm prune --omit=dev --no-audit --no-fund");
  }
  lines.push(
    `ENV NODE_ENV=production PORT=${BUILT_IMAGE_PORT}`,
    `USER ${BASE_USER}`,
    `CMD ${execForm(["npm", "start"])}`,
  );
  const how = [
    deps > 0 ? `${lock ? `npm ci (${lock})` : "npm install"}` : "no dependencies",
    build ? "npm run build" : undefined,
    "npm start",
  ].filter((x) => x !== undefined);
  return {
    language: "node",
    dockerfilePath: undefined,
    dockerfile: `${lines.join("\n")}\n`,
    bases: [NODE_BASE],
    summary: `Node.js (package.json): ${how.join(", ")}`,
  };
}

/** `web: …` of a Procfile, if it has one. */
function procfileWeb(text: string | undefined): string | undefined {
  for (const line of (text ?? "").split("\n")) {
    const m = /^web:\s*(.+?)\s*$/.exec(line);
    if (m?.[1]) return m[1];
  }
  return undefined;
}

const PYTHON_MAINS = ["main.py", "app.py", "server.py", "start.py", "wsgi.py"];

function pythonPlan(src: SourceTree, has: (p: string) => boolean): BuildPlan {
  const web = procfileWeb(src.read("Procfile"));
  const main = PYTHON_MAINS.find(has);
  if (web === undefined && main === undefined)
    throw new DetectError(
      "source",
      `a Python project needs a Procfile with a "web:" line or one of ${PYTHON_MAINS.join(", ")} at the root, or a Dockerfile`,
    );
  const lines = [
    `FROM ${PYTHON_BASE.name}`,
    BUILD_AS_ROOT,
    "WORKDIR /app",
    "RUN python3 -m venv /opt/venv",
    "ENV PATH=/opt/venv/bin:$PATH PIP_DISABLE_PIP_VERSION_CHECK=1",
  ];
  const pip = "RUN --mount=type=cache,id=pip,target=/root/.cache/pip pip install";
  if (has("requirements.txt")) lines.push("COPY requirements.txt ./", `${pip} -r requirements.txt`);
  lines.push("COPY . .");
  if (has("pyproject.toml")) lines.push(`${pip} .`);
  lines.push(
    `ENV PORT=${BUILT_IMAGE_PORT} PYTHONUNBUFFERED=1`,
    `USER ${BASE_USER}`,
    web !== undefined ? `CMD ${execForm(["/bin/sh", "-c", web])}` : `CMD ${execForm(["python", main ?? "main.py"])}`,
  );
  const deps = [has("requirements.txt") ? "requirements.txt" : "", has("pyproject.toml") ? "pyproject.toml" : ""]
    .filter((x) => x !== "")
    .join(" and ");
  return {
    language: "python",
    dockerfilePath: undefined,
    dockerfile: `${lines.join("\n")}\n`,
    bases: [PYTHON_BASE],
    summary: `Python (${deps}): ${web !== undefined ? `Procfile web: ${web}` : `python ${main ?? ""}`}`,
  };
}

/** The package to build: the root when it holds Go files, else the only (or first) cmd/<name>. */
function goPackage(paths: readonly string[]): string {
  if (paths.some((p) => /^[^/]+\.go$/.test(p) && !p.endsWith("_test.go"))) return ".";
  const cmds = [...new Set(paths.map((p) => /^cmd\/([^/]+)\/[^/]+\.go$/.exec(p)?.[1]).filter((x) => x !== undefined))];
  cmds.sort();
  if (cmds[0] !== undefined) return `./cmd/${cmds[0]}`;
  throw new DetectError(
    "source",
    "go.mod is at the root but no Go file is, nor any cmd/<name>/: krane builds the root package or cmd/<name>",
  );
}

function goPlan(src: SourceTree, has: (p: string) => boolean): BuildPlan {
  const pkg = goPackage(src.paths);
  const cache =
    "--mount=type=cache,id=gomod,target=/root/go/pkg/mod --mount=type=cache,id=gobuild,target=/root/.cache/go-build";
  const lines = [
    `FROM ${GO_BASE.name} AS build`,
    BUILD_AS_ROOT,
    "WORKDIR /src",
    `COPY ${["go.mod", ...(has("go.sum") ? ["go.sum"] : [])].join(" ")} ./`,
  ];
  if (has("go.sum")) lines.push(`RUN ${cache} go mod download`);
  lines.push(
    "COPY . .",
    `RUN ${cache} CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/app ${pkg}`,
    `FROM ${RUN_BASE.name}`,
    "COPY --from=build /out/app /app/app",
    `ENV PORT=${BUILT_IMAGE_PORT}`,
    `USER ${BASE_USER}`,
    `ENTRYPOINT ${execForm(["/app/app"])}`,
  );
  return {
    language: "go",
    dockerfilePath: undefined,
    dockerfile: `${lines.join("\n")}\n`,
    bases: [GO_BASE, RUN_BASE],
    summary: `Go (go.mod): go build ${pkg}, run as a static binary`,
  };
}

function staticPlan(): BuildPlan {
  const lines = [
    `FROM ${NODE_BASE.name}`,
    "COPY . /srv/www",
    `ENV PORT=${BUILT_IMAGE_PORT}`,
    `USER ${BASE_USER}`,
    `CMD ${execForm(["node", STATIC_SERVER, "/srv/www"])}`,
  ];
  return {
    language: "static",
    dockerfilePath: undefined,
    dockerfile: `${lines.join("\n")}\n`,
    bases: [NODE_BASE],
    summary: "a static site (index.html), served by krane's static server",
  };
}

/**
 * The plan for `src`: its Dockerfile (`dockerfile` when the build names one), else a generated
 * one. Throws DetectError naming the field when it cannot build the source.
 */
export function detect(src: SourceTree, opts: { dockerfile?: string } = {}): BuildPlan {
  const files = new Set(src.paths);
  const has = (p: string): boolean => files.has(p);
  if (opts.dockerfile !== undefined && opts.dockerfile !== "") {
    const path = normalizePath(opts.dockerfile);
    if (path === undefined) throw new DetectError("dockerfile", `"${opts.dockerfile}" is not a path inside the source`);
    if (!has(path)) throw new DetectError("dockerfile", `${path} is not in the source`);
    return {
      language: "dockerfile",
      dockerfilePath: path,
      dockerfile: undefined,
      bases: ALL_BASES,
      summary: `the Dockerfile ${path}`,
    };
  }
  if (has("Dockerfile"))
    return {
      language: "dockerfile",
      dockerfilePath: "Dockerfile",
      dockerfile: undefined,
      bases: ALL_BASES,
      summary: "the Dockerfile at the root",
    };
  if (has("go.mod")) return goPlan(src, has);
  if (has("requirements.txt") || has("pyproject.toml")) return pythonPlan(src, has);
  if (has("package.json")) return nodePlan(src, has);
  if (has("index.html")) return staticPlan();
  throw new DetectError(
    "source",
    "found no Dockerfile and no project krane knows at the root (go.mod, requirements.txt or pyproject.toml, package.json with a start script, index.html)",
  );
}
