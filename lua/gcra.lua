-- gcra (docs/algorithms.md): pack(a = whole ms of TAT, r = remainder in units of 1/L ms). An
-- absent key is TAT = now.
--
-- A TAT a + r / L is d = (a - now) * L + r units of 1/L ms ahead of now. After a backwards
-- clock step that product can leave the exact range, so this computes the doc's values from
-- a - now and r without forming it unless it fits (a - now <= floor((B * W - r) / L)).
local function gcra(key, now, l, w, b, cost, out, at)
  local bw = b * w
  local a, r = now, 0
  local s = redis.call('GET', key)
  if s then
    a, r = unpack2(s)
    if a < now then a, r = now, 0 end  -- base = max(TAT, now)
  end
  local room = 0  -- floor((B * W - d) / W), 0 when d > B * W
  if a - now <= floor_div(bw - r, l) then room = floor_div(bw - ((a - now) * l + r), w) end
  local reset = a - now - floor_div(-r, l)  -- ceil(d / L)
  if cost > b then return put(out, at, false, b, room, reset, -1) end
  local x = r + cost * w
  local q = floor_div(x, l)
  local na, nr = a + q, x - q * l  -- new = base + cost * W / L, remainder carried
  local fits = na - now <= floor_div(bw - nr, l)
  if cost > 0 and not fits then  -- a peek is always allowed
    return put(out, at, false, b, room, reset, na - now - floor_div(bw - nr, l))
  end
  local ahead = na - now - floor_div(-nr, l)
  room = 0
  if fits then room = floor_div(bw - ((na - now) * l + nr), w) end
  put(out, at, true, b, room, ahead, 0)
  if cost > 0 then return pack(na, nr), ahead end
end
algorithms.gcra = gcra
