#!/usr/bin/env node
// The peer in bench/compare: rate-limiter-flexible's RateLimiterRedis on ioredis, driven the
// way floodgate-bench drives floodgate (same processes, same calls in flight, same keys, same
// duration, one agreed start), printing the same JSON fields. Run by bench/compare after it
// installs the two packages into a scratch folder given as NODE_PATH.
//
//   node bench/peer_rate_limiter_flexible.js --redis redis://127.0.0.1:6379 --processes 2 \
//        --concurrency 32 --connections 2 --keys 10000 --duration-ms 5000 --limit 100 --window-ms 1000
//
// Optional, as floodgate-bench's flags of the same names: --zipf S picks key k with weight
// 1/(k+1)^S (else uniformly); --rate R sends R consume() a second over all processes on a
// Poisson schedule (open loop: whether or not earlier answers came, at most --concurrency in
// flight per process; one due while all are busy waits for a slot), else each of the
// --concurrency loops sends its next call when the last is answered.
'use strict';

const { fork } = require('child_process');

function parseArgs(argv) {
  const o = {
    redis: null, processes: 1, concurrency: 1, connections: 1, keys: 1, durationMs: 5000,
    limit: 100, windowMs: 1000, cost: 1, child: null, zipf: 0, rate: 0,
  };
  const names = {
    '--redis': 'redis', '--processes': 'processes', '--concurrency': 'concurrency',
    '--connections': 'connections', '--keys': 'keys', '--duration-ms': 'durationMs',
    '--limit': 'limit', '--window-ms': 'windowMs', '--cost': 'cost', '--child': 'child',
    '--zipf': 'zipf', '--rate': 'rate',
  };
  for (let i = 2; i < argv.length; i += 2) {
    const name = names[argv[i]];
    if (!name || i + 1 >= argv.length) throw new Error(`bad argument '${argv[i]}'`);
    o[name] = name === 'redis' ? argv[i + 1] : Number(argv[i + 1]);
    if (name === 'zipf' || name === 'rate') {
      if (!(Number.isFinite(o[name]) && o[name] >= 0 && o[name] <= 1e8)) {
        throw new Error(`${argv[i]}: expected a number in [0, 1e8], got '${argv[i + 1]}'`);
      }
    } else if (name !== 'redis' && !(Number.isInteger(o[name]) && o[name] >= 0)) {
      throw new Error(`${argv[i]}: expected a non-negative integer`);
    }
  }
  if (!o.redis) throw new Error('--redis URL is required');
  if (o.windowMs % 1000 !== 0) throw new Error('--window-ms: RateLimiterRedis counts whole seconds');
  return o;
}

// The same log-linear buckets as floodgate-bench's histogram (128 per power of two), so the
// percentiles are read the same way on both sides.
const SUB = 128, HALF = 64, MAX_BITS = 40;
function bucketOf(v) {
  v = Math.min(v, 2 ** MAX_BITS - 1);
  if (v < SUB) return v;
  const width = Math.floor(Math.log2(v)) + 1;
  const shift = width - 7;
  return SUB + (shift - 1) * HALF + (Math.floor(v / 2 ** shift) - HALF);
}
function highestIn(b) {
  if (b < SUB) return b;
  const shift = Math.floor((b - SUB) / HALF) + 1;
  const top = ((b - SUB) % HALF) + HALF;
  return (top + 1) * 2 ** shift - 1;
}
const BUCKETS = bucketOf(2 ** MAX_BITS - 1) + 1;

function percentile(counts, total, max, q) {
  if (total === 0) return 0;
  if (q >= 1) return max;
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    seen += counts[i];
    if (seen >= rank) return Math.min(highestIn(i), max);
  }
  return max;
}

async function runChild(o) {
  const Redis = require('ioredis');
  const { RateLimiterRedis } = require('rate-limiter-flexible');
  const clients = [];
  const limiters = [];
  for (let c = 0; c < Math.max(1, o.connections); c++) {
    const client = new Redis(o.redis, { maxRetriesPerRequest: 1, lazyConnect: false });
    clients.push(client);
    limiters.push(new RateLimiterRedis({
      storeClient: client, points: o.limit, duration: o.windowMs / 1000, keyPrefix: 'rlflx',
    }));
  }
  const keys = Array.from({ length: o.keys }, (_, k) => `peer-${k}`);
  // Zipf: the cumulative weights, searched by bisection (as floodgate-bench's key_distribution).
  let cdf = null;
  if (o.zipf > 0 && o.keys > 1) {
    cdf = new Float64Array(o.keys);
    let sum = 0;
    for (let k = 0; k < o.keys; k++) { sum += 1 / Math.pow(k + 1, o.zipf); cdf[k] = sum; }
    for (let k = 0; k < o.keys; k++) cdf[k] /= sum;
  }
  const pickKey = () => {
    if (!cdf) return keys[Math.floor(Math.random() * keys.length)];
    const u = Math.random();
    let lo = 0, hi = o.keys - 1;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (cdf[mid] < u) lo = mid + 1; else hi = mid; }
    return keys[lo];
  };
  // Connect and load the script before the clock starts (get() is a read: consumes nothing).
  await Promise.all(limiters.map((l) => l.get(keys[0])));
  process.send({ type: 'ready' });
  const start = await new Promise((resolve) => process.on('message', (m) => {
    if (m.type === 'start') resolve(m.startMs);
  }));
  while (Date.now() < start) await new Promise((r) => setImmediate(r));

  const counts = new Array(BUCKETS).fill(0);
  let total = 0, max = 0, allowed = 0, denied = 0, errors = 0, firstError = '';
  const stop = start + o.durationMs;
  let finished = start;
  async function one(limiter) {
      const key = pickKey();
      const t0 = process.hrtime.bigint();
      let verdict;
      try {
        await limiter.consume(key, o.cost);
        verdict = 'allowed';
      } catch (e) {
        // Denial rejects with a RateLimiterRes; anything else is a failure.
        if (e instanceof Error) {
          verdict = 'error';
          if (!firstError) firstError = String(e.message);
        } else {
          verdict = 'denied';
        }
      }
      const us = Number((process.hrtime.bigint() - t0) / 1000n);
      if (verdict === 'error') { errors++; return; }
      if (verdict === 'allowed') allowed++; else denied++;
      counts[bucketOf(us)]++;
      total++;
      if (us > max) max = us;
  }
  async function loop(slot) {
    const limiter = limiters[slot % limiters.length];
    while (Date.now() < stop) await one(limiter);
    finished = Math.max(finished, Date.now());
  }
  async function openLoop() {
    const gapMs = 1000 * o.processes / o.rate;
    const slots = Math.max(1, o.concurrency);
    let due = start, inFlight = 0, sent = 0, freed = null;
    const pending = new Set();
    while (true) {
      due += -Math.log(1 - Math.random()) * gapMs;
      if (due >= stop) break;
      const wait = due - Date.now();
      if (wait >= 1) await new Promise((r) => setTimeout(r, wait));
      while (inFlight >= slots) await new Promise((r) => { freed = r; });
      inFlight++;
      const p = one(limiters[sent++ % limiters.length]).finally(() => {
        inFlight--;
        pending.delete(p);
        if (freed) { const f = freed; freed = null; f(); }
      });
      pending.add(p);
    }
    await Promise.all(pending);
    finished = Math.max(finished, Date.now());
  }
  if (o.rate > 0) await openLoop();
  else await Promise.all(Array.from({ length: o.concurrency }, (_, i) => loop(i)));
  await Promise.all(clients.map((c) => c.quit().catch(() => {})));
  // The IPC channel keeps a worker alive: send, let go of it, and leave.
  process.send({ type: 'result', counts, total, max, allowed, denied, errors, firstError, start, finished },
    () => process.disconnect());
}

async function runParent(o) {
  const children = [];
  const results = [];
  let ready = 0;
  await new Promise((resolve, reject) => {
    for (let i = 0; i < o.processes; i++) {
      const args = process.argv.slice(2).concat(['--child', String(i)]);
      const child = fork(__filename, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      children.push(child);
      child.on('message', (m) => {
        if (m.type === 'ready' && ++ready === o.processes) {
          const startMs = Date.now() + 100;
          for (const c of children) c.send({ type: 'start', startMs });
        } else if (m.type === 'result') {
          results.push(m);
          if (results.length === o.processes) resolve();
        }
      });
      child.on('exit', (code) => {
        if (results.length < o.processes && code !== 0) reject(new Error(`worker ${i} exited with ${code}`));
      });
    }
    // Never leave workers behind, whatever happens to this process.
    process.on('exit', () => children.forEach((c) => c.kill('SIGKILL')));
  });

  const counts = new Array(BUCKETS).fill(0);
  let total = 0, max = 0, allowed = 0, denied = 0, errors = 0, firstError = '';
  let start = Infinity, finished = 0;
  for (const r of results) {
    r.counts.forEach((c, i) => { counts[i] += c; });
    total += r.total; max = Math.max(max, r.max);
    allowed += r.allowed; denied += r.denied; errors += r.errors;
    firstError = firstError || r.firstError;
    start = Math.min(start, r.start); finished = Math.max(finished, r.finished);
  }
  const elapsed = (finished - start) / 1000;
  const qs = [0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 1];
  const out = {
    target: 'rate-limiter-flexible',
    processes: o.processes, concurrency: o.concurrency, connections: o.connections, keys: o.keys,
    zipf: o.zipf, rate: o.rate,
    limit: o.limit, window_ms: o.windowMs, duration_ms: o.durationMs, elapsed_s: elapsed,
    decisions: total, decisions_per_sec: elapsed > 0 ? total / elapsed : 0,
    allowed, denied, errors,
    latency_us: {
      p50: percentile(counts, total, max, 0.5), p90: percentile(counts, total, max, 0.9),
      p99: percentile(counts, total, max, 0.99), p999: percentile(counts, total, max, 0.999),
      max, distribution: qs.map((q) => [q, percentile(counts, total, max, q)]),
    },
  };
  if (firstError) out.first_error = firstError;
  process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
}

let opts;
try {
  opts = parseArgs(process.argv);
} catch (e) {
  console.error(`peer_rate_limiter_flexible: ${e.message}`);
  process.exit(2);
}
(opts.child === null ? runParent(opts) : runChild(opts)).catch((e) => {
  console.error(`peer_rate_limiter_flexible: ${e.message}`);
  process.exit(1);
});
