-- fixed_window (docs/algorithms.md): a string pack(window index floor(now / W), count).
local function fixed_window(key, now, l, w, b, cost)
  local i = floor_div(now, w)
  local q = 0
  local v = redis.call('GET', key)
  if v then
    local si, c = unpack2(v)
    if si == i then q = c end
  end
  local until_next = i * w + w - now
  local allowed = cost <= l and q + cost <= l
  local q2 = q + (allowed and cost or 0)
  local retry = 0
  if cost > l then
    retry = -1
  elseif not allowed then
    retry = until_next
  end
  local out = reply(allowed, l, l - q2, q2 > 0 and until_next or 0, retry)
  if not allowed or cost == 0 then return out end
  return out, function()
    redis.call('SET', key, pack(i, q2), 'PX', str(until_next))
  end
end
algorithms.fixed_window = fixed_window
