-- sliding_window (docs/algorithms.md): pack(current window index floor(now / W), previous
-- count, current count).
local function sliding_window(key, now, l, w, b, cost, out, at)
  local i = (now - now % w) / w  -- floor(now / W): exact, see floor_div
  local ws = i * w
  local prev, cur = 0, 0
  local v = redis.pcall('GET', key)
  if v then
    if type(v) == 'table' then return nil, nil, v end  -- WRONGTYPE: the item's own error
    local si, p, c = unpack3(v)
    if si == i then
      prev, cur = p, c
    elseif si == i - 1 then
      prev = c
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
    if cost > 0 then return pack(i, prev, cur2), ws + 2 * w - now end
    return
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
