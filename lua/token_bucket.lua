-- token_bucket (docs/algorithms.md): pack(last update t, level in units of 1/W token). An
-- absent key is a full bucket. Floors are written out inline (see floor_div).
local function token_bucket(key, now, l, w, b, cost, out, at)
  local capacity = b * w
  local level, lag, updated = capacity, 0, now
  local s = redis.pcall('GET', key)
  if s then
    local t, v = tonumber(s), 0
    if t and t >= 0 and t < two53 then  -- unpack2 inline: the digits' value is exact
      local d = t % 10
      local m, p = (t - d) / 10, 1
      for _ = 1, d do p = p * 10 end
      v = m % p
      t = (m - v) / p
    elseif type(s) == 'table' then
      return nil, nil, s  -- WRONGTYPE: the item's own error
    else
      t, v = unpack2(s)
    end
    -- After a backwards clock step t is ahead of now: the refill resumes only at t.
    local elapsed = 0
    if t > now then
      lag, updated = t - now, t
    else
      elapsed = now - t
    end
    -- Compare before multiplying: an idle key's elapsed * limit can leave the exact range.
    local short = capacity - v  -- elapsed < ceil((capacity - v) / L)
    if elapsed < (short + (-short) % l) / l then level = v + elapsed * l end
  end
  local x = level  -- the level reset_after is of: after this request if allowed
  local allowed = cost <= b and level >= cost * w
  if allowed then x = level - cost * w end
  local reset = 0  -- until full: lag + ceil((capacity - x) / L)
  if x < capacity then
    local short = capacity - x
    reset = lag + (short + (-short) % l) / l
  end
  if allowed then
    out[at + 1], out[at + 2] = (x - x % w) / w, reset  -- put(out, at, true, ...) inline
    if cost > 0 then return pack(updated, x), reset end
  elseif cost > b then
    put(out, at, false, floor_div(level, w), reset, -1)
  else
    put(out, at, false, floor_div(level, w), reset, lag - floor_div(level - cost * w, l))
  end
end
algorithms.token_bucket = token_bucket
