// Maps errors to Connect codes at the edge. Domain errors keep their message (it names the field
// and never holds secrets); anything unexpected is logged and answered with a bare Internal, so
// no database detail leaks to callers.
import { Code, ConnectError } from "@connectrpc/connect";
import { DomainError, type DomainErrorCode } from "../errors.js";
import { CursorCompactedError } from "../stream/watch.js";

const CODES: Record<DomainErrorCode, Code> = {
  invalid_argument: Code.InvalidArgument,
  not_found: Code.NotFound,
  already_exists: Code.AlreadyExists,
  failed_precondition: Code.FailedPrecondition,
  permission_denied: Code.PermissionDenied,
};

export function toConnectError(err: unknown, onUnexpected: (err: unknown) => void): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof DomainError) return new ConnectError(err.message, CODES[err.code]);
  if (err instanceof CursorCompactedError) return new ConnectError(err.message, Code.Aborted);
  onUnexpected(err);
  return new ConnectError("internal error", Code.Internal);
}
