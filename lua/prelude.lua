-- floodgate: helpers shared by every script (docs/algorithms.md, "Common ground").
--
-- Every generated script is `#!lua` + this prelude + algorithm file(s) + an entry
-- (cmake/embed_lua.cmake). An algorithm file defines one function
--   decide(key, now, p, cost) -> reply, commit
-- that reads the state, returns the five-integer reply and, only when the request is allowed
-- with cost > 0, a function that writes the new state and its PEXPIRE. Nothing else writes.

-- The policy bound on limit x window and burst x window (and on cost and now_ms): below it
-- every value fits a double exactly, so Lua computes what C++'s int64_t does.
local max_value = 1e15

local algorithms = {}

-- floor(a / b) and ceil(a / b) of exact rationals, b > 0. a / b is rounded, so check the
-- candidate quotient against a (the products are exact integers below 2^53).
local function floor_div(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

local function ceil_div(a, b)
  return -floor_div(-a, b)
end

-- The start of the epoch-aligned window holding now (also for now < 0, like C++).
local function window_start(now, w)
  return floor_div(now, w) * w
end

-- Numbers go to Redis as exact decimal strings: tostring() keeps only 14 digits.
local function str(n)
  return string.format('%d', n)
end

-- The five integers of a decision; remaining and reset_after are never negative, and any
-- negative retry_after means never (-1).
local function reply(allowed, limit, remaining, reset_after, retry_after)
  if remaining < 0 then remaining = 0 end
  if reset_after < 0 then reset_after = 0 end
  if retry_after < 0 then retry_after = -1 end
  return {allowed and 1 or 0, limit, remaining, reset_after, retry_after}
end

-- A decimal integer in [lo, hi], or nil. Rejects signs other than '-', spaces, exponents,
-- fractions, hex, 'nan' and 'inf', which tonumber() alone would accept.
local function parse_int(s, lo, hi)
  if type(s) ~= 'string' or #s > 20 or not string.find(s, '^%-?%d+$') then return nil end
  local n = tonumber(s)
  if n < lo or n > hi then return nil end
  return n
end

local function bad(what, value, expected)
  if type(value) ~= 'string' then value = tostring(value) end
  value = string.gsub(string.sub(value, 1, 32), '[^%w%.%-+_ ]', '?')
  return 'ERR floodgate: ' .. what .. " must be " .. expected .. " (got '" .. value .. "')"
end

-- Now in ms: the test clock when given, else Redis's TIME (read once per call).
local function read_now(arg)
  if arg == nil or arg == '' then
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local n = parse_int(arg, -max_value, max_value)
  if n == nil then return nil, bad('now_ms', arg, 'empty or an integer in -1e15..1e15') end
  return n
end

-- {limit, window, burst} and the cost, or nil and the error message (which starts with
-- `what`, e.g. 'item 2 ', to say where).
local function parse_item(what, limit, window, burst, cost)
  local p = {
    limit = parse_int(limit, 1, max_value),
    window = parse_int(window, 1, max_value),
    burst = parse_int(burst, 1, max_value),
  }
  if p.limit == nil then return nil, bad(what .. 'limit', limit, 'an integer in 1..1e15') end
  if p.window == nil then return nil, bad(what .. 'window_ms', window, 'an integer in 1..1e15') end
  if p.burst == nil then return nil, bad(what .. 'burst', burst, 'an integer in 1..1e15') end
  if p.limit * p.window > max_value then
    return nil, bad(what .. 'limit x window_ms', limit .. 'x' .. window, 'at most 1e15')
  end
  if p.burst * p.window > max_value then
    return nil, bad(what .. 'burst x window_ms', burst .. 'x' .. window, 'at most 1e15')
  end
  local c = parse_int(cost, 0, max_value)
  if c == nil then return nil, bad(what .. 'cost', cost, 'an integer in 0..1e15') end
  return p, c
end
