-- token_bucket (docs/algorithms.md): a string pack(last update t, level in units of 1/W
-- token). An absent key is a full bucket.
local function token_bucket(key, now, l, w, b, cost)
  local capacity = b * w
  local level, lag, updated = capacity, 0, now
  local s = redis.call('GET', key)
  if s then
    local t, v = unpack2(s)
    -- After a backwards clock step t is ahead of now: the refill resumes only at t.
    local elapsed = 0
    if t > now then
      lag, updated = t - now, t
    else
      elapsed = now - t
    end
    -- Compare before multiplying: an idle key's elapsed * limit can leave the exact range.
    if elapsed < -floor_div(v - capacity, l) then level = v + elapsed * l end
  end
  local function reset_after(x)
    if x >= capacity then return 0 end
    return lag - floor_div(x - capacity, l)
  end
  if cost > b then return reply(false, b, floor_div(level, w), reset_after(level), -1) end
  local allowed = level >= cost * w
  if not allowed then
    return reply(false, b, floor_div(level, w), reset_after(level),
                 lag - floor_div(level - cost * w, l))
  end
  local after = level - cost * w
  local out = reply(true, b, floor_div(after, w), reset_after(after), 0)
  if cost == 0 then return out end
  return out, function()
    redis.call('SET', key, pack(updated, after), 'PX', str(reset_after(after)))
  end
end
algorithms.token_bucket = token_bucket
