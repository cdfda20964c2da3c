// Ending a test file's process on purpose. A file whose HTTP/2 sessions went through a peer that
// was frozen, killed or blackholed can, after its last test passed, spin at 100 % CPU inside Node
// 20's exit-time handle cleanup (node::Environment::CleanupHandles, seen with gdb: no syscall, no
// JavaScript, the inspector unanswered) until the runner's 10-minute limit fails the file.

/**
 * Exits this process a few seconds after the file's last hook (call it there): everything is
 * closed and every result reported by then, and process.exit() skips that cleanup. The exit code
 * is the one node:test set (1 after a failure).
 */
export function exitAfterLastHook(delayMs = 5_000): void {
  setTimeout(() => process.exit(), delayMs);
}
