#!lua
-- The lean reference for token_bucket (bench/compare, bench/lua_cost): the least a batched
-- token-bucket script can do, to judge floodgate's batch script against in the same run. Not
-- used by floodgate. KEYS = the keys, one decision each at cost 1; ARGV = {capacity,
-- per_token_us}: the bucket's size in tokens and the µs one token takes to refill.
-- State: "<tokens>:<µs of the last refill>", one string (a bucket is a level and a time; an
-- absent key is a full bucket). Returns one integer per key: the tokens left, or -1 when
-- denied.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local capacity, per = tonumber(ARGV[1]), tonumber(ARGV[2])
local find, sub, format = string.find, string.sub, string.format
local out = {}
for i = 1, #KEYS do
  local tokens, last = capacity, now
  local s = redis.call('GET', KEYS[i])
  if s then
    local colon = find(s, ':', 1, true)
    tokens, last = sub(s, 1, colon - 1) + 0, sub(s, colon + 1) + 0
    local elapsed = now - last
    local add = (elapsed - elapsed % per) / per  -- whole tokens refilled since
    if tokens + add >= capacity then
      tokens, last = capacity, now
    else
      tokens, last = tokens + add, last + add * per
    end
  end
  if tokens >= 1 then
    tokens = tokens - 1
    local ttl = (capacity - tokens) * per - (now - last)  -- µs until full
    redis.call('SET', KEYS[i], format('%d:%d', tokens, last), 'PX',
               format('%d', (ttl - ttl % 1000) / 1000 + 1))
    out[i] = tokens
  else
    out[i] = -1
  end
end
return out
