-- gcra (docs/algorithms.md): hash {a = whole ms of TAT, r = remainder in units of 1/L ms}.
-- An absent key is TAT = now.

-- A TAT a + r / L is d = (a - now) * L + r units of 1/L ms ahead of now. After a backwards
-- clock step that product can leave the exact range, so these compute the doc's values from
-- a - now and r without forming it.
local function gcra_fits(a, r, now, l, bw)  -- d <= B * W
  return a - now <= floor_div(bw - r, l)
end

local function gcra_room(a, r, now, l, w, bw)  -- floor((B * W - d) / W), 0 when d > B * W
  if not gcra_fits(a, r, now, l, bw) then return 0 end
  return floor_div(bw - ((a - now) * l + r), w)
end

local function gcra_ceil_ahead(a, r, now, l)  -- ceil(d / L)
  return a - now + ceil_div(r, l)
end

local function gcra(key, now, l, w, b, cost)
  local bw = b * w
  local state = redis.call('HMGET', key, 'a', 'r')
  local a, r = tonumber(state[1]), tonumber(state[2])
  if a == nil or r == nil or a < now then a, r = now, 0 end  -- base = max(TAT, now)
  local room = gcra_room(a, r, now, l, w, bw)
  local reset = gcra_ceil_ahead(a, r, now, l)
  if cost > b then return reply(false, b, room, reset, -1) end
  local x = r + cost * w
  local q = floor_div(x, l)
  local na, nr = a + q, x - q * l  -- new = base + cost * W / L, remainder carried
  if cost > 0 and not gcra_fits(na, nr, now, l, bw) then  -- a peek is always allowed
    return reply(false, b, room, reset, na - now + ceil_div(nr - bw, l))
  end
  local out = reply(true, b, gcra_room(na, nr, now, l, w, bw), gcra_ceil_ahead(na, nr, now, l), 0)
  if cost == 0 then return out end
  return out, function()
    redis.call('HSET', key, 'a', str(na), 'r', str(nr))
    redis.call('PEXPIRE', key, str(gcra_ceil_ahead(na, nr, now, l)))
  end
end
algorithms.gcra = gcra
