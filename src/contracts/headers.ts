// HTTP header names shared across processes: the CLI and scripts with ctrl (idempotency keys,
// request ids), and the sentinel with the apps behind it (request ids).

/** Sent by a client to make a call idempotent (proto/krane/ctrl/v1/api.proto says how ctrl keeps keys). */
export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";
/** Set by ctrl on an answer it gave before, to a repeat under the same key. */
export const IDEMPOTENCY_REPLAYED_HEADER = "idempotency-replayed";
/** A request's id: a client's own when short and plain, else one ctrl (or the sentinel) makes. */
export const REQUEST_ID_HEADER = "x-request-id";
