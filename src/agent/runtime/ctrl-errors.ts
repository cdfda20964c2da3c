// Which ctrl errors are downstream failures (count against the circuit breaker) and which are
// answers (NotFound, InvalidArgument, …: ctrl is up and said no).
import { Code, ConnectError } from "@connectrpc/connect";

const answers = new Set<Code>([
  Code.NotFound,
  Code.InvalidArgument,
  Code.AlreadyExists,
  Code.FailedPrecondition,
  Code.OutOfRange,
  Code.Unimplemented,
  Code.PermissionDenied,
  Code.Unauthenticated,
]);

export function isCtrlDownstreamFailure(err: unknown): boolean {
  if (err instanceof ConnectError) return !answers.has(err.code);
  return true;
}
