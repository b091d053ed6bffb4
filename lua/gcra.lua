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
--
-- Expiry on a 1 s grid (docs/algorithms.md, "Redis representation"): a key expires at the end
-- of the second its TAT lies in (on the clock's whole seconds), so a write whose TAT lies in
-- the same second as the TAT it read keeps the key's expiry, and then adds the difference with
-- INCRBY (as fixed_window does): the value is one integer, which INCRBY changes in place,
-- where SET ... PX makes a new value object, removes and re-adds the key's expiry entry and is
-- rewritten by Redis for propagation, and answers a status that Lua receives as a table
-- (bench/lua_cost: about a third of a lean batched item). Every writer of a gcra state keeps
-- the rule (refund.lua too): a key's expiry is at least the end of its TAT's second.

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
  local a, r, v = now, 0, nil  -- v: the value read, when one integer
  local read  -- the whole ms of the TAT read, if any
  local s = redis.pcall('GET', key)
  if s then
    v = tonumber(s)  -- nil for Redis's error table too
    if v then
      r = v % l
      a = (v - r) / l
    elseif type(s) == 'table' then
      return nil, nil, s  -- WRONGTYPE: the item's own error
    else
      a, r = read_tat(s, l)
      if a == nil or r == nil then return nil, nil, not_a_tat(s) end
    end
    read = a
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
    local second = na - na % 1000
    local t = na * l + nr  -- tat_value inline
    if t < two53 then
      -- (t > v: the TAT only moves on, so the increment is positive and exact)
      if v and second == read - read % 1000 then return format('%d', t - v), -1 end  -- INCRBY
      return format('%d', t), second + 1000 - now
    end
    return format('%d:%d', na, nr), second + 1000 - now
  end
end
algorithms.gcra = gcra
