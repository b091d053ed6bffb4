-- sliding_window (docs/algorithms.md): a string pack(current window index floor(now / W),
-- previous count, current count).
local function sliding_window(key, now, l, w, b, cost)
  local i = floor_div(now, w)
  local ws = i * w
  local prev, cur = 0, 0
  local v = redis.call('GET', key)
  if v then
    local si, p, c = unpack3(v)
    if si == i then
      prev, cur = p, c
    elseif si == i - 1 then
      prev = c
    end
  end
  local e = now - ws
  local used = cur - floor_div(-prev * (w - e), w)
  local allowed = cost <= l and used + cost <= l
  local cur2 = cur + (allowed and cost or 0)
  local reset = 0
  if cur2 > 0 then
    reset = ws + 2 * w - now
  elseif prev > 0 then
    reset = ws + w - now
  end
  local retry = 0
  if cost > l then
    retry = -1
  elseif not allowed then
    -- The earliest time used + cost <= limit: later in this window when the current count
    -- alone leaves room (prev > 0 then), else in the next one (cur > 0 then).
    local a = l - cur - cost
    if a >= 0 then
      retry = ws + w - floor_div(a * w, prev) - now
    else
      retry = ws + 2 * w - floor_div((l - cost) * w, cur) - now
    end
  end
  local out = reply(allowed, l, l - used - (allowed and cost or 0), reset, retry)
  if not allowed or cost == 0 then return out end
  return out, function()
    redis.call('SET', key, pack(i, prev, cur2), 'PX', str(ws + 2 * w - now))
  end
end
algorithms.sliding_window = sliding_window
