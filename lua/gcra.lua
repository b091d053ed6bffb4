-- gcra (docs/algorithms.md): a string pack(a = whole ms of TAT, r = remainder in units of
-- 1/L ms). An absent key is TAT = now.

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

local function gcra(key, now, l, w, b, cost)
  local bw = b * w
  local a, r = now, 0
  local s = redis.call('GET', key)
  if s then
    a, r = unpack2(s)
    if a < now then a, r = now, 0 end  -- base = max(TAT, now)
  end
  local room = gcra_room(a, r, now, l, w, bw)
  local reset = a - now - floor_div(-r, l)  -- ceil(d / L)
  if cost > b then return reply(false, b, room, reset, -1) end
  local x = r + cost * w
  local q = floor_div(x, l)
  local na, nr = a + q, x - q * l  -- new = base + cost * W / L, remainder carried
  if cost > 0 and not gcra_fits(na, nr, now, l, bw) then  -- a peek is always allowed
    return reply(false, b, room, reset, na - now - floor_div(bw - nr, l))
  end
  local ahead = na - now - floor_div(-nr, l)
  local out = reply(true, b, gcra_room(na, nr, now, l, w, bw), ahead, 0)
  if cost == 0 then return out end
  return out, function()
    redis.call('SET', key, pack(na, nr), 'PX', str(ahead))
  end
end
algorithms.gcra = gcra
