// A gRPC client for floodgated's Envoy rate limit service that shares no code with floodgate:
// @grpc/grpc-js and @grpc/proto-loader, loading service/envoy/proto at run time.
//   node rls_client.js HOST:PORT [--tls-ca FILE [--tls-cert FILE --tls-key FILE]]
//                     [--compress gzip|deflate] < calls.json
// (--tls-ca: over TLS, trusting that CA; --tls-cert/--tls-key: the client's certificate, for
// mutual TLS; --compress: the RateLimitService client compresses its messages, grpc-js's
// channel option.) Results on stdout.
// calls.json: a JSON list of calls, made in order; each call runs `parallel` copies at once
// (default 1) and gives one result per copy:
//   {"check": <RateLimitRequest as JSON>, "deadline_ms": 1000, "parallel": 1}
//   {"health": "<service name or empty>"}
//   {"raw": "<base64 of a request body sent as RateLimitRequest bytes>"}
//   {"await_file": "<path>"}: waits (up to deadline_ms) until the file exists, so a test can
//     change something (pause Redis) between two calls with Node already started
// Prints a JSON list of lists: per call, per copy, {"ok": response} or {"code": n, "details": s}.
'use strict';
const fs = require('fs');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');

const root = path.resolve(__dirname, '../../service/envoy/proto');
const options = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true,
                  includeDirs: [root] };
const rls = grpc.loadPackageDefinition(
  loader.loadSync('envoy/service/ratelimit/v3/rls.proto', options)).envoy.service.ratelimit.v3;
const health = grpc.loadPackageDefinition(
  loader.loadSync('grpc/health/v1/health.proto', options)).grpc.health.v1;

const address = process.argv[2];
const flags = {};
for (let i = 3; i + 1 < process.argv.length; i += 2) flags[process.argv[i]] = process.argv[i + 1];
const read = (name) => (flags[name] ? fs.readFileSync(flags[name]) : null);
const credentials = () => (flags['--tls-ca']
  ? grpc.credentials.createSsl(read('--tls-ca'), read('--tls-key'), read('--tls-cert'))
  : grpc.credentials.createInsecure());
const algorithms = { deflate: 1, gzip: 2 };
const rlsOptions = flags['--compress']
  ? { 'grpc.default_compression_algorithm': algorithms[flags['--compress']] } : {};
const rlsClient = new rls.RateLimitService(address, credentials(), rlsOptions);
const healthClient = new health.Health(address, credentials());
const rawClient = new grpc.Client(address, credentials());

function settle(resolve) {
  return (err, response) => resolve(err ? { code: err.code, details: err.details }
                                        : { ok: response });
}

function one(call) {
  return new Promise((resolve) => {
    const deadline = new Date(Date.now() + (call.deadline_ms ?? 5000));
    if (call.check !== undefined) {
      rlsClient.ShouldRateLimit(call.check, { deadline }, settle(resolve));
    } else if (call.health !== undefined) {
      healthClient.Check({ service: call.health }, { deadline }, settle(resolve));
    } else if (call.await_file !== undefined) {
      const poll = () => {
        if (fs.existsSync(call.await_file)) resolve({ ok: {} });
        else if (Date.now() > deadline.getTime()) resolve({ code: -1, details: 'no file' });
        else setTimeout(poll, 5);
      };
      poll();
    } else if (call.raw !== undefined) {
      rawClient.makeUnaryRequest('/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
        (b) => b, (b) => b, Buffer.from(call.raw, 'base64'), { deadline },
        (err, response) => resolve(err ? { code: err.code, details: err.details }
                                       : { ok: { bytes: response.length } }));
    } else {
      resolve({ code: -1, details: 'unknown call' });
    }
  });
}

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const calls = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const results = [];
  for (const call of calls) {
    const copies = [];
    for (let i = 0; i < (call.parallel ?? 1); ++i) copies.push(one(call));
    results.push(await Promise.all(copies));
  }
  process.stdout.write(JSON.stringify(results) + '\n');
  rlsClient.close();
  healthClient.close();
  rawClient.close();
}

main().catch((e) => { console.error(e); process.exit(1); });
