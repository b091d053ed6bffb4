-- floodgate: helpers shared by every script (docs/algorithms.md, "Common ground").
--
-- Every generated script is `#!lua` + this prelude + algorithm file(s) + an entry
-- (cmake/embed_lua.cmake). An algorithm file defines one function
--   decide(key, now, limit, window, burst, cost, out, at) -> value, ttl, err
-- that reads the state, stores the decision at out[at + 1 ..] (two integers or three: put,
-- expand) and returns what to write, only when the request is allowed with cost > 0 (else nothing):
-- `value, ttl` for `SET key value PX ttl`, `increment, -1` for `INCRBY key increment` (the
-- expiry kept), or a function to call that writes (sliding_log). write(key, value, ttl) does
-- any of them. Nothing else writes. A key holding another type is no decision: decide then
-- returns nil, nil and Redis's error (its reads use redis.pcall), and the entry says so for
-- that item alone (a batch goes on with the others).
--
-- Cost matters here: Redis runs these on its one thread, so every instruction is taken from
-- every other client (bench/lua_cost measures them per call). What it showed, besides the
-- Redis commands themselves (GET ~3.5k instructions, SET ... PX ~13k, INCRBY ~4k): EVALSHA
-- runs this whole file on every call, so each top-level `local function` is a closure made per
-- call (~0.5k); in Redis's Lua every new table (~1.4k), closure, string, function call (~0.3k)
-- and every call into C (string.format ~0.8k, string-to-number coercion ~0.8k: strtod) costs
-- far more than arithmetic, and a number handed to redis.call more still (Redis 7.0 prints it
-- with "%.17g", ~2.8k). So the hot path makes no table or closure per item, writes floors out
-- inline, hands Redis strings made by string.format('%d'), keeps the policy in locals, and
-- leaves error messages to a slow path that only runs for bad arguments.

-- The policy bound on limit x window and burst x window (and on cost and now_ms): below it
-- every value fits a double exactly, so Lua computes what C++'s int64_t does.
local max_value = 1e15
local two53 = 9007199254740992
local find, format, sub, byte = string.find, string.format, string.sub, string.byte

local algorithms = {}

-- floor(a / b) of exact integers, b > 0. Lua's a % b is a - floor(a / b) * b with a rounded
-- quotient, so it can land one b outside [0, b); corrected, a - m is a multiple of b and the
-- division is exact (the products are exact integers below 2^53). When |a| + b < 2^53 the
-- rounded quotient never crosses an integer (a / b is at least 1 / b from the next one, the
-- rounding error at most (|a| / b + 1) * 2^-53), so m is already right and the hot paths write
-- (a - a % b) / b inline: every operand there is below 4e15 (the policy bounds, 1e15 each).
local function floor_div(a, b)
  local m = a % b
  if m < 0 then
    m = m + b
  elseif m >= b then
    m = m - b
  end
  return (a - m) / b
end

-- Numbers go to Redis as exact decimal strings: tostring() keeps only 14 digits.
local function str(n)
  return format('%d', n)
end

-- Stores a decision at out[at + 1 ..] as the batch script answers it: `remaining, reset_after`
-- when allowed, `-1 - remaining, reset_after, retry_after` when denied (two or three integers:
-- each element of a reply costs Redis as much as a dozen Lua operations, and each table store
-- a few). remaining and reset_after are never negative; any negative retry_after means never
-- (-1). The limit is the caller's to add: it is the burst (which equals the limit for the
-- windows).
local function put(out, at, allowed, remaining, reset_after, retry_after)
  if remaining < 0 then remaining = 0 end
  if reset_after < 0 then reset_after = 0 end
  if allowed then
    out[at + 1], out[at + 2] = remaining, reset_after
  else
    if retry_after < 0 then retry_after = -1 end
    out[at + 1], out[at + 2], out[at + 3] = -1 - remaining, reset_after, retry_after
  end
end

-- The decision put() stored at out[at + 1 ..] as the five integers the other entry scripts
-- answer: allowed (0/1), limit, remaining, reset_after, retry_after.
local function expand(out, at, limit)
  local first = out[at + 1]
  if first >= 0 then
    out[at + 1], out[at + 2], out[at + 3], out[at + 4], out[at + 5] =
        1, limit, first, out[at + 2], 0
  else
    out[at + 1], out[at + 2], out[at + 3], out[at + 4], out[at + 5] =
        0, limit, -1 - first, out[at + 2], out[at + 3]
  end
end

-- After INCRBY key by was refused (its reply is an error): the caller's ACL lacks INCRBY, which
-- was not in the user floodgate documented before fixed_window used it. The same sum with
-- SET ... KEEPTTL.
local function add_without_incrby(key, by)
  redis.call('SET', key, format('%d', redis.call('GET', key) + by), 'KEEPTTL')
end

-- Does what a decide function returned.
local function write(key, value, ttl)
  if ttl == nil then
    value()
  elseif ttl < 0 then
    if type(redis.pcall('INCRBY', key, value)) == 'table' then add_without_incrby(key, value) end
  else
    redis.call('SET', key, value, 'PX', format('%d', ttl))
  end
end

-- State as one string value (docs/algorithms.md, "Redis representation"): the decimal digits
-- of x (an integer, maybe negative), then those of each following non-negative integer (none
-- for a 0), then one character per following integer giving its digit count d as byte 48 + d
-- ('0'..'9', then ':'..'@' for 10..16). Exact for every value below 2^53, and when it is at
-- most 19 digits Redis stores it as a 64-bit integer: 8 bytes instead of a string.
-- pack(x, y) and pack(x, y, z) make it with one string.format (a number handed to redis.call
-- would cost more: Redis 7.0 prints it with "%.17g"); unpack2(s) -> x, y and unpack3(s) ->
-- x, y, z read it back, from one coercion when its value is below 2^53. The hot paths read
-- pack(x, y) inline from that coercion (tonumber(s), which is nil for Redis's error table too)
-- and call unpack2 only for the rest: calling unpack2/unpack3 and write() instead, per item,
-- cost a batch of 25 1.3 % (token_bucket) to 6.6 % (fixed_window) more (bench/lua_cost, same
-- run), so gcra, token_bucket, fixed_window, sliding_window and batch.lua keep those copies.

-- The digit count of an integer y >= 0 (0 for 0).
local function digit_count(y)
  local d, p = 0, 1
  while y >= p do d, p = d + 1, p * 10 end
  return d
end

-- When x > 0, every digit count is below 10 and the packed digits' value is below 2^53, the
-- value is that one integer, made with one conversion: string.format costs Redis ~1.4k
-- instructions a call and ~1k more for each further conversion (bench/lua_cost).
local function pack(x, y, z)
  if z == nil then  -- (digit_count inline: a Lua call costs more than the loop)
    if y == 0 then return format('%d0', x) end
    local d, p = 1, 10
    while y >= p do d, p = d + 1, p * 10 end
    if x > 0 and d < 10 then
      local v = (x * p + y) * 10 + d
      if v < two53 then return format('%d', v) end
    end
    return format('%d%d%c', x, y, 48 + d)
  end
  local dy, dz = digit_count(y), digit_count(z)
  if y == 0 then
    if z == 0 then return format('%d00', x) end
    return format('%d%d0%c', x, z, 48 + dz)
  end
  if z == 0 then return format('%d%d%c0', x, y, 48 + dy) end
  if x > 0 and dy < 10 and dz < 10 then
    local py, pz = 1, 1
    for _ = 1, dy do py = py * 10 end
    for _ = 1, dz do pz = pz * 10 end
    local v = ((x * py + y) * pz + z) * 100 + dy * 10 + dz
    if v < two53 then return format('%d', v) end
  end
  return format('%d%d%d%c%c', x, y, z, 48 + dy, 48 + dz)
end

local function unpack2(s)
  local v = tonumber(s)
  if v and v >= 0 and v < two53 then  -- the digits' value is exact
    local dy = v % 10
    local m, p = (v - dy) / 10, 1
    for _ = 1, dy do p = p * 10 end
    local y = m % p
    return (m - y) / p, y
  end
  local ny = byte(s, -1) - 48
  if ny == 0 then return sub(s, 1, -2) + 0, 0 end
  return sub(s, 1, -2 - ny) + 0, sub(s, -1 - ny, -2) + 0
end

local function unpack3(s)
  local v = tonumber(s)
  if v and v >= 0 and v < two53 then
    local dz = v % 10
    local m = (v - dz) / 10
    local dy = m % 10
    m = (m - dy) / 10
    local p = 1
    for _ = 1, dz do p = p * 10 end
    local z = m % p
    m = (m - z) / p
    p = 1
    for _ = 1, dy do p = p * 10 end
    local y = m % p
    return (m - y) / p, y, z
  end
  local ny, nz = byte(s, -2, -1)
  ny, nz = ny - 48, nz - 48
  local x = sub(s, 1, -3 - ny - nz) + 0
  local y, z = 0, 0
  if ny > 0 then y = sub(s, -2 - ny - nz, -3 - nz) + 0 end
  if nz > 0 then z = sub(s, -2 - nz, -3) + 0 end
  return x, y, z
end

-- Why an item's arguments were refused: the error message, starting with `what` (e.g.
-- 'item 2 ') to say where. Only called once parse_item has refused them.
local function explain_item(what, limit, window, burst, cost)
  local function bad(name, value, expected)
    if type(value) ~= 'string' then value = tostring(value) end
    value = string.gsub(sub(value, 1, 32), '[^%w%.%-+_ ]', '?')
    return 'ERR floodgate: ' .. name .. ' must be ' .. expected .. " (got '" .. value .. "')"
  end
  -- Two more callers: explain_item('now', value) and explain_item('algorithm', where, value).
  if what == 'now' then return bad('now_ms', limit, 'empty or an integer in -1e15..1e15') end
  if what == 'algorithm' then
    return bad(limit .. 'algorithm', window,
               'sliding_log, sliding_window, fixed_window, token_bucket or gcra')
  end
  -- A decimal integer in [lo, hi], or nil. Rejects signs other than '-', spaces, exponents,
  -- fractions, hex, 'nan' and 'inf', which tonumber() alone would accept.
  local function int(s, lo, hi)
    if type(s) ~= 'string' or #s > 20 or not find(s, '^%-?%d+$') then return nil end
    local n = tonumber(s)
    if n < lo or n > hi then return nil end
    return n
  end
  local l, w, b = int(limit, 1, max_value), int(window, 1, max_value), int(burst, 1, max_value)
  if l == nil then return bad(what .. 'limit', limit, 'an integer in 1..1e15') end
  if w == nil then return bad(what .. 'window_ms', window, 'an integer in 1..1e15') end
  if b == nil then return bad(what .. 'burst', burst, 'an integer in 1..1e15') end
  if l * w > max_value then
    return bad(what .. 'limit x window_ms', limit .. 'x' .. window, 'at most 1e15')
  end
  if b * w > max_value then
    return bad(what .. 'burst x window_ms', burst .. 'x' .. window, 'at most 1e15')
  end
  return bad(what .. 'cost', cost, 'an integer in 0..1e15')
end

-- limit, window, burst and cost as numbers when they are what floodgate sends (decimal
-- integers within the policy bounds), else nil: then explain_item says why.
local function parse_item(limit, window, burst, cost)
  -- One pattern for all four: digits only, so the coercions below are exact and cannot fail.
  -- (Cheaper than a find per argument, or than remembering each string's number per call:
  -- a table and its growth cost more than they save unless many items share arguments.)
  if not find(limit .. ',' .. window .. ',' .. burst .. ',' .. cost, '^%d+,%d+,%d+,%d+$') then
    return nil
  end
  local l, w, b, c = limit + 0, window + 0, burst + 0, cost + 0
  if l < 1 or w < 1 or b < 1 or c > max_value or l * w > max_value or b * w > max_value then
    return nil
  end
  return l, w, b, c
end

-- Now in ms: the test clock when given, else Redis's TIME (read once per call); or nil and
-- the error message.
local function read_now(arg)
  if arg == '' then
    local t = redis.call('TIME')
    local us = t[2] + 0  -- below 10^6: the floor inline is exact (see floor_div)
    return t[1] * 1000 + (us - us % 1000) / 1000
  end
  if #arg <= 20 and find(arg, '^%-?%d+$') then
    local n = arg + 0
    if n >= -max_value and n <= max_value then return n end
  end
  return nil, explain_item('now', arg)
end

-- What a lone check (single.lua) keeps from one call to the next where the scripts are a
-- function library (FCALL), whose top level runs once, when it loads: nil under EVALSHA, where
-- this file runs on every call (`redis.register_function` exists only while a library loads).
-- A lone check pays Redis's per-call costs for one decision, so a few thousand instructions
-- are a tenth of it (bench/lua_cost): parse_item's pattern and four coercions (~6k) are made
-- once per distinct (limit, window_ms, burst, cost) instead of per call, the decision's table
-- is made once, and the digits of the last expiry written with PXAT are kept (~1.4k a
-- string.format), which every key whose state ends at the same instant shares (a window's
-- end, gcra's second).
local lone = redis.register_function and {parsed = {}, size = 0, out = {0, 0, 0, 0, 0}} or nil

-- parse_item(limit, window, burst, cost), remembered in lone.parsed (by the argument strings,
-- a table per argument: no string is made to look one up) when there is one. Called on a miss:
-- single.lua looks the arguments up itself (a Lua call costs more than the lookup). At most 1024
-- are kept (a few hundred KB of Lua memory at worst; a deployment has a few policies and
-- costs): past that it starts again empty, so arguments that never repeat cost a bounded
-- table and a little more per call than parse_item alone.
local function parse_lone(limit, window, burst, cost)
  local l, w, b, c = parse_item(limit, window, burst, cost)
  if l == nil or lone == nil then return l, w, b, c end
  local by = lone.parsed
  if lone.size >= 1024 then
    by = {}
    lone.parsed, lone.size = by, 0
  end
  lone.size = lone.size + 1
  for _, s in ipairs({limit, window, burst}) do
    local next = by[s]
    if next == nil then
      next = {}
      by[s] = next
    end
    by = next
  end
  by[cost] = {l, w, b, c}
  return l, w, b, c
end
