-- fixed_window (docs/algorithms.md): pack(window index floor(now / W), count).
local function fixed_window(key, now, l, w, b, cost, out, at)
  local i = floor_div(now, w)
  local q = 0
  local v = redis.call('GET', key)
  if v then
    local si, c = unpack2(v)
    if si == i then q = c end
  end
  local until_next = i * w + w - now
  if cost > l then
    put(out, at, false, l, l - q, q > 0 and until_next or 0, -1)
  elseif cost > 0 and q + cost > l then  -- a peek is never denied
    put(out, at, false, l, l - q, q > 0 and until_next or 0, until_next)
  else
    q = q + cost
    put(out, at, true, l, l - q, q > 0 and until_next or 0, 0)
    if cost > 0 then return pack(i, q), until_next end
  end
end
algorithms.fixed_window = fixed_window
