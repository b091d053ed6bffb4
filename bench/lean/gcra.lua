#!lua
-- The lean reference for gcra (bench/compare, bench/lua_cost): the least a batched GCRA script
-- can do, to judge floodgate's batch script against in the same run. Not used by floodgate.
-- KEYS = the keys, one decision each at cost 1; ARGV = {interval_us, tolerance_us}: W / L and
-- (B - 1) x W / L in microseconds. State: the theoretical arrival time in µs, one integer.
-- Returns one integer per key: 0 when allowed, else the µs until a retry would be.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local interval, tolerance = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {}
for i = 1, #KEYS do
  local tat = tonumber(redis.call('GET', KEYS[i])) or now
  if tat < now then tat = now end
  local new = tat + interval
  if new - now <= tolerance + interval then
    local ttl = new - now
    redis.call('SET', KEYS[i], string.format('%d', new), 'PX',
               string.format('%d', (ttl - ttl % 1000) / 1000 + 1))
    out[i] = 0
  else
    out[i] = new - now - tolerance - interval
  end
end
return out
