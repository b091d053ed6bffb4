-- gcra (docs/algorithms.md): pack(a = whole ms of TAT, r = remainder in units of 1/L ms). An
-- absent key is TAT = now.
--
-- A TAT a + r / L is d = (a - now) * L + r units of 1/L ms ahead of now. After a backwards
-- clock step that product can leave the exact range, so this computes the doc's values from
-- a - now and r without forming it unless it fits (a - now <= floor((B * W - r) / L)).
-- Floors are written out as (x - x % y) / y (see floor_div: exact for these operands), since
-- a Lua call per floor costs more here than the rest of the arithmetic.
local function gcra(key, now, l, w, b, cost, out, at)
  local bw = b * w
  local a, r = now, 0
  local s = redis.pcall('GET', key)
  if s then
    local v = tonumber(s)
    if v and v >= 0 and v < two53 then  -- unpack2 inline: the digits' value is exact
      local d = v % 10
      local m, p = (v - d) / 10, 1
      for _ = 1, d do p = p * 10 end
      r = m % p
      a = (m - r) / p
    elseif type(s) == 'table' then
      return nil, nil, s  -- WRONGTYPE: the item's own error
    else
      a, r = unpack2(s)
    end
    if a < now then a, r = now, 0 end  -- base = max(TAT, now)
  end
  local ahead, t = a - now, bw - r
  local room = 0  -- floor((B * W - d) / W), 0 when d > B * W
  if ahead <= (t - t % l) / l then
    t = bw - (ahead * l + r)
    room = (t - t % w) / w
  end
  local reset = ahead + (r + (-r) % l) / l  -- ceil(d / L)
  if cost > b then return put(out, at, false, room, reset, -1) end
  local x = r + cost * w
  local nr = x % l
  local na = a + (x - nr) / l  -- new = base + cost * W / L, remainder carried
  t = bw - nr
  local fits = (t - t % l) / l  -- the most whole ms the new TAT may be ahead
  ahead = na - now
  if cost > 0 and ahead > fits then  -- a peek is always allowed
    return put(out, at, false, room, reset, ahead - fits)
  end
  room = 0
  if ahead <= fits then
    t = bw - (ahead * l + nr)
    room = (t - t % w) / w
  end
  ahead = ahead + (nr + (-nr) % l) / l
  out[at + 1], out[at + 2] = room, ahead  -- put(out, at, true, ...) inline
  if cost > 0 then return pack(na, nr), ahead end
end
algorithms.gcra = gcra
