-- sliding_log (docs/algorithms.md): a sorted set with one member per millisecond that admitted
-- something, whatever the cost: score = that time, member = '<total>:<cost>', where cost is
-- what that millisecond admitted and total what the log admitted up to and including it, so
-- the live count is a difference of two totals. A call is O(log n) (a denial's retry_after
-- is a binary search over ranks, O(log^2 n)), plus removing the entries that aged out since
-- the last write, each of which is removed once.
local max_total = 4503599627370496  -- 2^52: totals and their sums stay exact doubles

-- A member's total and cost.
local function log_entry(member)
  local sep = find(member, ':', 1, true)
  return sub(member, 1, sep - 1) + 0, sub(member, sep + 1) + 0
end

-- `late` (reserve.lua only): record an admission as made `late` ms after now, so it counts until
-- then plus W (a reservation spent until then: src/core/reserve.hpp).
local function sliding_log(key, now, l, w, b, cost, out, at, late)
  local rec = now + (late or 0)
  local horizon = now - w  -- entries t <= now - window have aged out
  local count, base, newest = 0, 0, now
  local tail, tail_time, tail_total, tail_cost, head
  local last = redis.pcall('ZRANGE', key, '-1', '-1', 'WITHSCORES')
  if last.err then return nil, nil, last end  -- WRONGTYPE: the item's own error
  if last[1] then
    tail, tail_time = last[1], tonumber(last[2])
    if tail_time > horizon then  -- the newest entry is live: so is the count
      head = redis.call('ZRANGE', key, '(' .. str(horizon), '+inf', 'BYSCORE', 'LIMIT', '0',
                        '1')[1]
      local head_total, head_cost = log_entry(head)
      base = head_total - head_cost
      tail_total, tail_cost = log_entry(tail)
      count = tail_total - base
      newest = tail_time
    end
  end
  local allowed = cost == 0 or (cost <= l and count + cost <= l)  -- a peek is never denied
  local count2 = count + (allowed and cost or 0)
  if allowed and cost > 0 and rec > newest then newest = rec end
  local retry = 0
  if cost > l then
    retry = -1
  elseif not allowed then
    -- The entry holding the k-th oldest live unit (k = count + cost - l) must age out first:
    -- the first live entry whose total reaches base + k.
    local target = base + count + cost - l
    local lo, hi = redis.call('ZRANK', key, head), redis.call('ZCARD', key) - 1
    while lo < hi do
      local mid = floor_div(lo + hi, 2)
      if log_entry(redis.call('ZRANGE', key, str(mid), str(mid))[1]) >= target then
        hi = mid
      else
        lo = mid + 1
      end
    end
    retry = tonumber(redis.call('ZRANGE', key, str(lo), str(lo), 'WITHSCORES')[2]) + w - now
  end
  local reset = count2 > 0 and newest + w - now or 0
  put(out, at, allowed, l - count2, reset, retry)
  if not allowed or cost == 0 then return end
  return function()
    if tail then redis.call('ZREMRANGEBYSCORE', key, '-inf', str(horizon)) end
    if head == nil then  -- nothing live: the log starts again from total 0
      redis.call('ZADD', key, str(rec), str(cost) .. ':' .. str(cost))
    else
      if tail_total + cost > max_total then
        -- Once in 2^52 units: number the live entries from 0 again.
        local all = redis.call('ZRANGE', key, '0', '-1', 'WITHSCORES')
        redis.call('DEL', key)
        for i = 1, #all, 2 do
          local t, c = log_entry(all[i])
          redis.call('ZADD', key, all[i + 1], str(t - base) .. ':' .. str(c))
        end
        tail_total = tail_total - base
        tail = str(tail_total) .. ':' .. str(tail_cost)
      end
      if tail_time >= rec then
        -- Admissions of one ms share one entry (after a backwards clock step, the newest's):
        -- each time is in the set once, so members never need ordering among equal scores.
        redis.call('ZREM', key, tail)
        redis.call('ZADD', key, str(tail_time),
                   str(tail_total + cost) .. ':' .. str(tail_cost + cost))
      else
        redis.call('ZADD', key, str(rec), str(tail_total + cost) .. ':' .. str(cost))
      end
    end
    redis.call('PEXPIRE', key, str(reset))
  end
end
algorithms.sliding_log = sliding_log
