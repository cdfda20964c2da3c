// The HTTP/2 receive windows of ctrl's server and of the CLI's connection to it. Node keeps the
// protocol's defaults (64 KiB per stream and 64 KiB for the whole connection) and gives window back
// only as the receiving code reads what arrived, so a sender with more to say waits one round trip
// per 64 KiB, and each round trip waits for the receiving process to be scheduled. A batch of log
// lines from an agent (up to a few hundred KiB) then took seconds per push on a busy machine, and
// held every other call on the agent's connection behind it. With these windows a batch goes out
// in one go. What a peer may send unread is still bounded: ctrl reads at most readMaxBytes of a
// request body, and the windows cap what sits unread per stream and per connection.

/** Bytes a peer may send on one stream before the reader has read them. */
export const HTTP2_STREAM_WINDOW = 4 * 1024 * 1024;
/** Bytes a peer may send on the whole connection before the reader has read them. */
export const HTTP2_CONNECTION_WINDOW = 16 * 1024 * 1024;
