// The CLI's exit codes beyond 0 and 1, shared by the light command definitions and the heavy
// client half (a module of its own so neither imports the other).

/** A command gave up because ctrl or its database was unavailable (sysexits EX_UNAVAILABLE). */
export const EXIT_UNAVAILABLE = 69;

/**
 * Whether a followed stream that ended with this Connect code is opened again (ctrl restarted,
 * an agent went quiet, the network broke): unavailable, internal, unknown, aborted, deadline
 * exceeded, resource exhausted. The numbers of @connectrpc/connect's Code, which this light
 * module does not import.
 */
export function isResumable(code: number): boolean {
  return [14, 13, 2, 10, 4, 8].includes(code);
}
