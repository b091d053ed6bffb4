-- fixed_window (docs/algorithms.md): hash {s = window start, c = count}.
local function fixed_window(key, now, l, w, b, cost)
  local ws = window_start(now, w)
  local state = redis.call('HMGET', key, 's', 'c')
  local q = 0
  if tonumber(state[1]) == ws then q = tonumber(state[2]) or 0 end
  local until_next = ws + w - now
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
    redis.call('HSET', key, 's', str(ws), 'c', str(q2))
    redis.call('PEXPIRE', key, str(until_next))
  end
end
algorithms.fixed_window = fixed_window
