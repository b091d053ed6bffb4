-- gcra (docs/algorithms.md): the TAT in units of 1/L ms, one integer (L and W reduced by their
-- gcd: core::params::of), so a read is one coercion and a write one string.format; when that
-- integer would not be exact (2^53 or more: a large reduced L, far from today) the value is
-- "<whole ms>:<remainder>" instead (tonumber() is nil for it: read_tat). An absent key is
-- TAT = now.
--
-- A TAT a + r / L is d = (a - now) * L + r units of 1/L ms ahead of now. After a backwards
-- clock step that product can leave the exact range, so this computes the doc's values from
-- a - now and r without forming it unless it fits (a - now <= floor((B * W - r) / L)).
-- Floors are written out as (x - x % y) / y (see floor_div: exact for these operands), since
-- a Lua call per floor costs more here than the rest of the arithmetic.

-- The TAT (whole ms a, remainder r) a value stores, or nil when it is not a gcra state.
local function read_tat(s, l)
  local t = tonumber(s)
  if t then
    local r = t % l
    return (t - r) / l, r
  end
  local colon = find(s, ':', 1, true)
  if colon then return tonumber(sub(s, 1, colon - 1)), tonumber(sub(s, colon + 1)) end
  return nil
end

local function not_a_tat(s)
  return redis.error_reply("ERR floodgate: not a gcra state: '" .. sub(s, 1, 40) .. "'")
end

-- The value that stores TAT a + r / l.
local function tat_value(a, r, l)
  local t = a * l + r  -- exact when below 2^53: a larger product rounds to 2^53 or more
  if t < two53 then return format('%d', t) end
  return format('%d:%d', a, r)
end

local function gcra(key, now, l, w, b, cost, out, at)
  local bw = b * w
  local a, r = now, 0
  local s = redis.pcall('GET', key)
  if s then
    local v = tonumber(s)  -- nil for Redis's error table too
    if v then
      r = v % l
      a = (v - r) / l
    elseif type(s) == 'table' then
      return nil, nil, s  -- WRONGTYPE: the item's own error
    else
      a, r = read_tat(s, l)
      if a == nil or r == nil then return nil, nil, not_a_tat(s) end
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
  if cost > 0 then
    local t = na * l + nr  -- tat_value inline
    if t < two53 then return format('%d', t), ahead end
    return format('%d:%d', na, nr), ahead
  end
end
algorithms.gcra = gcra
