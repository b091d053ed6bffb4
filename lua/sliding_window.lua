-- sliding_window (docs/algorithms.md): pack(current window index floor(now / W), previous
-- count, current count).
--
-- As in fixed_window.lua, an admission inside the window whose current count keeps its number
-- of digits adds 100c to the packed value with INCRBY (the count is followed by two digit
-- counts), keeping the expiry the window's first write set: the end of the next window.
local function sliding_window(key, now, l, w, b, cost, out, at)
  local i = (now - now % w) / w  -- floor(now / W): exact, see floor_div
  local ws = i * w
  local prev, cur, p = 0, 0, 0  -- p: 10^digits(cur) (cur > 0 only in the state's own window)
  local s = redis.pcall('GET', key)
  if s then
    local si, y, z
    local v = tonumber(s)
    if v and v >= 0 and v + 100 * cost < two53 then  -- unpack3 inline: the value is exact
      local dz = v % 10
      local m = (v - dz) / 10
      local dy = m % 10
      m = (m - dy) / 10
      p = 1
      for _ = 1, dz do p = p * 10 end
      z = m % p
      m = (m - z) / p
      local py = 1
      for _ = 1, dy do py = py * 10 end
      y = m % py
      si = (m - y) / py
    elseif type(s) == 'table' then
      return nil, nil, s  -- WRONGTYPE: the item's own error
    else
      si, y, z = unpack3(s)
    end
    if si == i then
      prev, cur = y, z
    elseif si == i - 1 then
      prev = z
    end
  end
  local e = now - ws
  local weighed = -prev * (w - e)
  local used = cur - (weighed - weighed % w) / w
  if cost == 0 or (cost <= l and used + cost <= l) then  -- a peek is never denied
    local cur2 = cur + cost
    local reset = 0
    if cur2 > 0 then
      reset = ws + 2 * w - now
    elseif prev > 0 then
      reset = ws + w - now
    end
    put(out, at, true, l - used - cost, reset, 0)
    if cost == 0 then return end
    if cur2 < p and cur > 0 and i > 0 then  -- (i > 0: no leading zero, which INCRBY refuses)
      return cost == 1 and '100' or format('%d', 100 * cost), -1  -- write(): INCRBY
    end
    return pack(i, prev, cur2), ws + 2 * w - now
  end
  local reset = 0
  if cur > 0 then
    reset = ws + 2 * w - now
  elseif prev > 0 then
    reset = ws + w - now
  end
  local retry = -1
  if cost <= l then
    -- The earliest time used + cost <= limit: later in this window when the current count
    -- alone leaves room (prev > 0 then), else in the next one (cur > 0 then).
    local a = l - cur - cost
    if a >= 0 then
      retry = ws + w - floor_div(a * w, prev) - now
    else
      retry = ws + 2 * w - floor_div((l - cost) * w, cur) - now
    end
  end
  put(out, at, false, l - used, reset, retry)
end
algorithms.sliding_window = sliding_window
