// Domain errors raised by the store and the handlers, independent of the wire protocol; the
// server maps them to Connect codes (see server/errors.ts). Messages never contain secrets.
export type DomainErrorCode =
  | "invalid_argument"
  | "not_found"
  | "already_exists"
  | "failed_precondition"
  | "permission_denied"
  | "resource_exhausted";

export class DomainError extends Error {
  constructor(
    readonly code: DomainErrorCode,
    message: string,
    /** The request field at fault, for invalid_argument. */
    readonly field?: string,
  ) {
    super(message);
    this.name = "DomainError";
  }
}

/** The HTTP status of each code, for the plain HTTP answers (webhooks, sign-in). */
export const HTTP_STATUS: Record<DomainErrorCode, number> = {
  invalid_argument: 400,
  not_found: 404,
  already_exists: 409,
  failed_precondition: 409,
  permission_denied: 403,
  resource_exhausted: 429,
};

export function invalidArgument(field: string, problem: string): DomainError {
  return new DomainError("invalid_argument", `${field}: ${problem}`, field);
}

export function notFound(what: string): DomainError {
  return new DomainError("not_found", `${what} not found`);
}

export function alreadyExists(what: string): DomainError {
  return new DomainError("already_exists", `${what} already exists`);
}

export function failedPrecondition(message: string): DomainError {
  return new DomainError("failed_precondition", message);
}
