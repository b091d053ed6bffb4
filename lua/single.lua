-- Entry of the per-algorithm scripts: one check sent alone; `algorithm` is set by the
-- generator just above. KEYS[1] = state key; ARGV = {limit, window_ms, burst, cost, now_ms
-- ('' unless a test clock)}.
--
-- The reply is the batch's item (batch.lua) made lighter where it can be, since a Lua table
-- returned costs Redis ~5.5k instructions more than one integer (bench/lua_cost), a twelfth of
-- a lone check:
--   allowed:  remaining + (burst + 1) x reset_after, one integer (remaining <= burst), when
--             below 2^53; else {remaining, reset_after}
--   denied:   {-1 - remaining, reset_after, retry_after (-1: never)}
-- The limit is not sent back: it is the burst, which the caller sent (script_decision.hpp).
if #KEYS ~= 1 or #ARGV ~= 5 then
  return redis.error_reply('ERR floodgate: ' .. algorithm .. ' takes 1 key and 5 arguments ' ..
                           '(limit, window_ms, burst, cost, now_ms), got ' .. #KEYS .. ' and ' ..
                           #ARGV)
end
local key, l, w, b, cost = KEYS[1], nil, nil, nil, nil
-- The parsed arguments looked up inline (a Lua call costs more than the lookup); parse_lone
-- parses and remembers them on a miss.
local parsed = lone and lone.parsed[ARGV[1]]
parsed = parsed and parsed[ARGV[2]]
parsed = parsed and parsed[ARGV[3]]
parsed = parsed and parsed[ARGV[4]]
if parsed then
  l, w, b, cost = parsed[1], parsed[2], parsed[3], parsed[4]
else
  l, w, b, cost = parse_lone(ARGV[1], ARGV[2], ARGV[3], ARGV[4])
  if l == nil then return redis.error_reply(explain_item('', ARGV[1], ARGV[2], ARGV[3], ARGV[4])) end
end
local clock, now = ARGV[5], nil
if clock == '' then  -- read_now inline
  local t = redis.call('TIME')
  local us, seconds = t[2] + 0, t[1]
  if lone == nil then
    seconds = seconds * 1000
  elseif lone.seconds == seconds then  -- (one string: Lua keeps one copy of each)
    seconds = lone.seconds_ms
  else
    lone.seconds = seconds
    seconds = seconds * 1000  -- (a coercion, strtod: ~0.7k instructions, once a second)
    lone.seconds_ms = seconds
  end
  now = seconds + (us - us % 1000) / 1000
else
  local err
  now, err = read_now(clock)
  if now == nil then return redis.error_reply(err) end
end
local out = lone and lone.out or {0, 0, 0, 0, 0}
local value, ttl, failed = algorithms[algorithm](key, now, l, w, b, cost, out, 0)
if failed then return failed end
if value then  -- write() inline (a Lua call costs more than these lines)
  if ttl == nil then
    value()
  elseif ttl < 0 then
    if type(redis.pcall('INCRBY', key, value)) == 'table' then add_without_incrby(key, value) end
  elseif clock ~= '' then
    redis.call('SET', key, value, 'PX', format('%d', ttl))
  else
    -- On Redis's clock the expiry is written as the instant it names (PXAT now + ttl, exactly
    -- the end the algorithm means: a window's end, gcra's second) rather than counted from
    -- the write (PX ttl, which Redis turns into that instant a little later): the digits of
    -- an instant many keys share are made once (`lone`).
    local at = now + ttl
    if lone == nil then
      at = format('%d', at)
    elseif lone.at == at then
      at = lone.at_text
    else
      lone.at = at
      at = format('%d', at)
      lone.at_text = at
    end
    redis.call('SET', key, value, 'PXAT', at)
  end
end
local first, reset = out[1], out[2]
if first < 0 then return {first, reset, out[3]} end
if first <= b then
  local packed = first + (b + 1) * reset
  if packed < two53 then return packed end
end
return {first, reset}
