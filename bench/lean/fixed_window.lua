#!lua
-- The lean reference for fixed_window (bench/compare, bench/lua_cost): the least a batched
-- fixed-window script can do, to judge floodgate's batch script against in the same run. Not
-- used by floodgate. KEYS = the keys, one decision each at cost 1; ARGV = {limit, window_ms}.
-- State: the count, one integer whose expiry ends the window (so windows start at each key's
-- first hit rather than on the clock). Returns one integer per key: the remaining count, or
-- -1 when denied.
local limit, window = tonumber(ARGV[1]), ARGV[2]
local out = {}
for i = 1, #KEYS do
  local count = tonumber(redis.call('GET', KEYS[i]) or '0')
  if count < limit then
    count = redis.call('INCRBY', KEYS[i], '1')
    if count == 1 then redis.call('PEXPIRE', KEYS[i], window) end
    out[i] = limit - count
  else
    out[i] = -1
  end
end
return out
