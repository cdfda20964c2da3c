// Maps errors to Connect codes at the edge, in one place for every method. Domain errors keep
// their message (it names the field and never holds secrets); an outage of the database becomes
// unavailable (or resource_exhausted) with a message naming the database and whether the request
// took effect (dependency-errors.ts); only what is left, a bug, is logged and answered with a
// bare internal, so no database detail leaks to callers.
import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { DomainError, type DomainErrorCode } from "../errors.js";
import { CursorCompactedError } from "../stream/watch.js";
import { classifyDependencyError, dependencyMessage, type DependencyFailure } from "./dependency-errors.js";

const CODES: Record<DomainErrorCode, Code> = {
  invalid_argument: Code.InvalidArgument,
  not_found: Code.NotFound,
  already_exists: Code.AlreadyExists,
  failed_precondition: Code.FailedPrecondition,
  permission_denied: Code.PermissionDenied,
  resource_exhausted: Code.ResourceExhausted,
};

/** Where the edge reports what it classified. */
export interface ErrorSinks {
  /** "PostgreSQL" or "SQLite": the database named in outage messages. */
  readonly databaseKind: string;
  /** A failure of a dependency (the caller logs outages once per transition, not per call). */
  dependency(f: DependencyFailure): void;
  /** A bug: logged with its detail, answered with a bare internal. */
  unexpected(err: unknown): void;
}

export function toConnectError(err: unknown, sinks: ErrorSinks): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof DomainError) return new ConnectError(err.message, CODES[err.code]);
  if (err instanceof CursorCompactedError) return new ConnectError(err.message, Code.Aborted);
  const outage = classifyDependencyError(err);
  if (outage) {
    sinks.dependency(outage);
    return new ConnectError(dependencyMessage(outage, sinks.databaseKind), outage.code);
  }
  sinks.unexpected(err);
  return new ConnectError("internal error", Code.Internal);
}

/**
 * What a failure before the interceptors means: the request could not be decoded. Connect
 * reports a body that is not a valid message as internal, and a unary body with no message or
 * several as unimplemented; both become invalid_argument. Everything else it reports there
 * already has the right code (a bad timeout, an unknown compression: unimplemented as gRPC
 * wants, a body over the size limit).
 */
export function undecodableRequest(code: Code, rawMessage: string, method: DescMethod): ConnectError | undefined {
  const type = method.input.typeName;
  if (code === Code.Internal)
    return new ConnectError(`invalid request: the body is not a valid ${type} (${rawMessage})`, Code.InvalidArgument);
  if (code === Code.Unimplemented && /missing input message/.test(rawMessage))
    return new ConnectError(`invalid request: the body holds no ${type} message`, Code.InvalidArgument);
  if (code === Code.Unimplemented && /extra input message/.test(rawMessage))
    return new ConnectError(`invalid request: the body holds more than one ${type} message`, Code.InvalidArgument);
  return undefined;
}
