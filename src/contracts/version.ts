// How ctrl tells its clients which build it runs: every response of its API port carries this
// header (Connect, gRPC and gRPC-Web alike), so no RPC or message changes. The value is
// buildLabel() from src/build-info.ts, e.g. "0.1.0+3f2a1bc9d0e4".
export const CTRL_VERSION_HEADER = "krane-ctrl-version";
