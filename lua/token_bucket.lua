-- token_bucket (docs/algorithms.md): hash {v = level in units of 1/W token, t = last update}.
-- An absent key is a full bucket.
local function token_bucket(key, now, l, w, b, cost)
  local capacity = b * w
  local state = redis.call('HMGET', key, 'v', 't')
  local v, t = tonumber(state[1]), tonumber(state[2])
  local level, lag, updated = capacity, 0, now
  if v ~= nil and t ~= nil then
    -- After a backwards clock step t is ahead of now: the refill resumes only at t.
    local elapsed = 0
    if t > now then
      lag, updated = t - now, t
    else
      elapsed = now - t
    end
    -- Compare before multiplying: an idle key's elapsed * limit can leave the exact range.
    if elapsed < ceil_div(capacity - v, l) then level = v + elapsed * l end
  end
  local function reset_after(x)
    if x >= capacity then return 0 end
    return lag + ceil_div(capacity - x, l)
  end
  if cost > b then return reply(false, b, floor_div(level, w), reset_after(level), -1) end
  local allowed = level >= cost * w
  if not allowed then
    return reply(false, b, floor_div(level, w), reset_after(level),
                 lag + ceil_div(cost * w - level, l))
  end
  local after = level - cost * w
  local out = reply(true, b, floor_div(after, w), reset_after(after), 0)
  if cost == 0 then return out end
  return out, function()
    redis.call('HSET', key, 'v', str(after), 't', str(updated))
    redis.call('PEXPIRE', key, str(reset_after(after)))
  end
end
algorithms.token_bucket = token_bucket
