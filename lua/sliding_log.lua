-- sliding_log (docs/algorithms.md): sorted set, one member per admitted cost unit,
-- score = admission time, member = '<time>:<n>' (unique even within one millisecond).
-- O(log n + cost) per call: counts, ranks and trims use the skip list, never a scan.
local function sliding_log(key, now, l, w, b, cost, out, at)
  local horizon = now - w  -- entries t <= now - window have aged out
  local count = redis.call('ZCOUNT', key, '(' .. str(horizon), '+inf')
  local allowed = cost <= l and count + cost <= l
  local count2 = count + (allowed and cost or 0)
  local newest = now
  if count > 0 then  -- then the largest entry is live
    newest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
  end
  if allowed and cost > 0 and now > newest then newest = now end
  local retry = 0
  if cost > l then
    retry = -1
  elseif not allowed then
    -- The k-th oldest live entry must age out first. Aged-out entries rank before live ones.
    local k = count + cost - l
    local rank = redis.call('ZCARD', key) - count + k - 1
    local entry = redis.call('ZRANGE', key, str(rank), str(rank), 'WITHSCORES')
    retry = tonumber(entry[2]) + w - now
  end
  local reset = count2 > 0 and newest + w - now or 0
  put(out, at, allowed, l, l - count2, reset, retry)
  if not allowed or cost == 0 then return end
  return function()
    redis.call('ZREMRANGEBYSCORE', key, '-inf', str(horizon))
    -- Entries with one score age out together, so those at now are '<now>:1'..'<now>:m' (also
    -- after a backwards clock step): number on from m + 1. NX never overwrites a member; if a
    -- stray one was in the way, go on numbering until all `cost` entries are in.
    local at = str(now)
    local n = redis.call('ZCOUNT', key, at, at)
    local added = 0
    while added < cost do
      local args = {'ZADD', key, 'NX'}
      for _ = 1, math.min(cost - added, 1000) do  -- unpack() is bounded by the Lua stack
        n = n + 1
        args[#args + 1] = at
        args[#args + 1] = at .. ':' .. str(n)
      end
      added = added + redis.call(unpack(args))
    end
    redis.call('PEXPIRE', key, str(reset))
  end
end
algorithms.sliding_log = sliding_log
