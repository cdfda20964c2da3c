// The CLI's exit codes beyond 0 and 1, shared by the light command definitions and the heavy
// client half (a module of its own so neither imports the other).

/** A command gave up because ctrl or its database was unavailable (sysexits EX_UNAVAILABLE). */
export const EXIT_UNAVAILABLE = 69;
