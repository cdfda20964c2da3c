// Maps errors to Connect codes at the edge. Domain errors keep their message (it names the field
// and never holds secrets); anything unexpected is logged and answered with a bare Internal, so
// no database detail leaks to callers.
import type { DescMethod } from "@bufbuild/protobuf";
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

/**
 * What a failure before the interceptors means: the request could not be decoded. Connect
 * reports that as internal (the body is not a valid message) or unimplemented (no message, or
 * more than one, in a unary call); everything else it reports there (bad timeout, compression,
 * size) already has the right code.
 */
export function undecodableRequest(code: Code, rawMessage: string, method: DescMethod): ConnectError | undefined {
  const type = method.input.typeName;
  if (code === Code.Internal) return new ConnectError(`invalid request: the body is not a valid ${type} (${rawMessage})`, Code.InvalidArgument);
  if (code === Code.Unimplemented) {
    const problem = /missing input message/.test(rawMessage) ? "holds no" : /extra input message/.test(rawMessage) ? "holds more than one" : "is not a";
    return new ConnectError(`invalid request: the body ${problem} ${type} message`, Code.InvalidArgument);
  }
  return undefined;
}
