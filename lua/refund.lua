-- Entry of the refund script (docs/algorithms.md, "Refunds"): gives back what an admitted
-- request consumed, never more than the state holds. Only this script holds the refund
-- functions, so checks pay nothing for them.
-- KEYS[1] = state key; ARGV = {algorithm, limit, window_ms, burst, cost, now_ms}.
-- With an idempotency key: KEYS[2] = its marker, ARGV[7] = how long it is kept (ms); a marker
-- already there means this refund was made: nothing is given back again.
-- Returns the five integers of a peek (cost 0) after the refund, then the cost given back
-- (0..cost; a part of a unit of token_bucket or gcra counts as one) and 1 if this was a replay
-- (the marker was there: the first refund's amount, kept in the marker; nothing given back now).
-- Each refund function returns the cost it gave back, as src/core/refund.cpp.
local refunds = {}

-- The newest live units go first: the live count drops from tail_total - base to
-- target = tail_total - cost (all of it if that is base or less). The entry where the totals
-- pass target is found by a binary search over ranks (totals grow with rank), and it and
-- every newer entry go in one ZREMRANGEBYSCORE; that entry comes back with the units below
-- target, if it had any. O(log^2 n) and one removal in Redis's C, whatever the log's length
-- and the cost (before: a ZREM and a ZRANGE per entry removed).
-- The empty log: UNLINK frees a long one on Redis's lazy-free thread (a DEL of 600,000
-- entries holds the one thread for ~300 ms); DEL where the ACL lacks UNLINK.
local function drop_log(key)
  local r = redis.pcall('UNLINK', key)
  if type(r) == 'table' and r.err then redis.call('DEL', key) end
end

function refunds.sliding_log(key, now, l, w, b, cost)
  local horizon = now - w
  local last = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
  if last[1] and tonumber(last[2]) > horizon then
    local head = redis.call('ZRANGE', key, '(' .. str(horizon), '+inf', 'BYSCORE', 'LIMIT', '0',
                            '1')[1]
    local head_total, head_own = log_entry(head)
    local last_total = log_entry(last[1])
    local target = last_total - cost
    if target <= head_total - head_own then
      drop_log(key)  -- every live unit refunded: the empty log
      return last_total - (head_total - head_own)
    end
    local lo, hi = redis.call('ZRANK', key, head), redis.call('ZCARD', key) - 1
    while lo < hi do
      local mid = floor_div(lo + hi, 2)
      if log_entry(redis.call('ZRANGE', key, str(mid), str(mid))[1]) > target then
        hi = mid
      else
        lo = mid + 1
      end
    end
    local cut = redis.call('ZRANGE', key, str(lo), str(lo), 'WITHSCORES')
    local total, own = log_entry(cut[1])
    -- Each time is in the log once (lua/sliding_log.lua), so the cut's rank onwards is its time
    -- onwards: ZREMRANGEBYSCORE, which the documented ACL user may run (not ...BYRANK).
    redis.call('ZREMRANGEBYSCORE', key, cut[2], '+inf')
    if total - own < target then
      redis.call('ZADD', key, cut[2], str(target) .. ':' .. str(target - (total - own)))
    end
    -- The newest entry is live (the cut, or one after the live head): the log's expiry.
    last = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
    redis.call('PEXPIRE', key, str(last[2] + w - now))
    return cost
  end
  if last[1] then drop_log(key) end  -- nothing live left: the empty log
  return 0
end

-- From the current window's count first, then the previous one's; the expiry stays.
function refunds.sliding_window(key, now, l, w, b, cost)
  local v = redis.call('GET', key)
  if not v then return 0 end
  local i = floor_div(now, w)
  local si, p, c = unpack3(v)
  local given
  if si == i then
    local from_current = cost < c and cost or c
    local from_previous = cost - from_current
    if from_previous > p then from_previous = p end
    c, p, given = c - from_current, p - from_previous, from_current + from_previous
  elseif si == i - 1 then
    given = cost < c and cost or c
    c = c - given
  else
    return 0
  end
  redis.call('SET', key, pack(si, p, c), 'KEEPTTL')
  return given
end

-- Only the current window; the expiry stays.
function refunds.fixed_window(key, now, l, w, b, cost)
  local v = redis.call('GET', key)
  if not v then return 0 end
  local si, q = unpack2(v)
  if si ~= floor_div(now, w) then return 0 end
  local given = cost < q and cost or q
  redis.call('SET', key, pack(si, q - given), 'KEEPTTL')
  return given
end

-- The tokens go back, up to a full bucket (which is no key at all).
function refunds.token_bucket(key, now, l, w, b, cost)
  local s = redis.call('GET', key)
  if not s then return 0 end
  local capacity = b * w
  local t, v = unpack2(s)
  local lag, updated, elapsed = 0, now, 0
  if t > now then lag, updated = t - now, t else elapsed = now - t end
  local level = capacity
  if elapsed < -floor_div(v - capacity, l) then level = v + elapsed * l end
  if capacity - level <= cost * w then
    redis.call('DEL', key)
    return level < capacity and -floor_div(level - capacity, w) or 0
  end
  level = level + cost * w
  redis.call('SET', key, pack(updated, level), 'PX', str(lag - floor_div(level - capacity, l)))
  return cost
end

-- The TAT moves back by cost x W / L, never before now (TAT <= now is no key at all).
function refunds.gcra(key, now, l, w, b, cost)
  local s = redis.call('GET', key)
  if not s then return 0 end
  local a0, r0 = read_tat(s, l)
  if a0 == nil or r0 == nil then return 0 end  -- not a gcra state: the peek after says so
  local x = r0 - cost * w
  local q = floor_div(x, l)
  local a, r = a0 + q, x - q * l
  if a < now or (a == now and r == 0) then
    redis.call('DEL', key)
    -- What the TAT held beyond now (units of 1/L ms; a unit of cost is W), a part rounded up.
    local owed = (a0 - now) * l + r0
    return owed > 0 and -floor_div(-owed, w) or 0
  end
  -- The key expires at the end of its TAT's second, as gcra.lua writes it.
  redis.call('SET', key, tat_value(a, r, l), 'PX', str(a - a % 1000 + 1000 - now))
  return cost
end

if not ((#KEYS == 1 and #ARGV == 6) or (#KEYS == 2 and #ARGV == 7)) then
  return redis.error_reply('ERR floodgate: refund takes 1 key and 6 arguments (algorithm, ' ..
                           'limit, window_ms, burst, cost, now_ms), or 2 keys and 7 (a marker ' ..
                           'and its ms), got ' .. #KEYS .. ' and ' .. #ARGV)
end
local keep = ARGV[7]
if keep and (not find(keep, '^%d+$') or #keep > 16 or keep + 0 < 1) then
  return redis.error_reply("ERR floodgate: a refund marker's ms must be in 1..1e16 (got '" ..
                           sub(keep, 1, 20) .. "')")
end
local refund, decide = refunds[ARGV[1]], algorithms[ARGV[1]]
if refund == nil then return redis.error_reply(explain_item('algorithm', '', ARGV[1])) end
local l, w, b, cost = parse_item(ARGV[2], ARGV[3], ARGV[4], ARGV[5])
if l == nil then return redis.error_reply(explain_item('', ARGV[2], ARGV[3], ARGV[4], ARGV[5])) end
if cost < 1 then return redis.error_reply('ERR floodgate: a refund\'s cost must be at least 1') end
local now, err = read_now(ARGV[6])
if now == nil then return redis.error_reply(err) end
-- The marker is set before the refund (SET NX decides): a script stops at nothing after its
-- validation above. It keeps what was given back, for a replay to answer the same.
local given, replayed = 0, 0
if not keep or redis.call('SET', KEYS[2], '0', 'NX', 'PX', keep) then
  given = refund(KEYS[1], now, l, w, b, cost)
  if keep and given > 0 then redis.call('SET', KEYS[2], str(given), 'XX', 'KEEPTTL') end
else
  given, replayed = tonumber(redis.call('GET', KEYS[2])) or 0, 1
end
local out = {0, 0, 0, 0, 0}
local _, _, failed = decide(KEYS[1], now, l, w, b, 0, out, 0)
if failed then return failed end
expand(out, 0, b)
out[6], out[7] = given, replayed
return out
