-- Entry of the release and renew scripts (docs/algorithms.md, "Concurrency limits").
-- KEYS[1] = lease set; ARGV = {lease id, lease_ms (0: release), now_ms}.
-- Returns 1 when the lease was live (released, or renewed to expire lease_ms from now), 0
-- when it was not: released already, expired, or never this key's. Nothing else changes.
if #KEYS ~= 1 or #ARGV ~= 3 then
  return redis.error_reply('ERR floodgate: release takes 1 key and 3 arguments (lease, ' ..
                           'lease_ms, now_ms), got ' .. #KEYS .. ' and ' .. #ARGV)
end
local id, ttl = ARGV[1], ARGV[2]
if #id < 1 or #id > 64 or #ttl > 16 or not find(ttl, '^%d+$') or ttl + 0 > max_value then
  return redis.error_reply('ERR floodgate: release wants a lease id of 1..64 bytes and ' ..
                           "lease_ms in 0..1e15 (got '" .. sub(ttl, 1, 20) .. "')")
end
ttl = ttl + 0
local now, err = read_now(ARGV[3])
if now == nil then return redis.error_reply(err) end
local key = KEYS[1]
local score = redis.call('ZSCORE', key, id)
if not score then return 0 end
if score + 0 <= now then  -- expired: its slot came back already
  redis.call('ZREM', key, id)
  return 0
end
if ttl == 0 then
  redis.call('ZREM', key, id)
  return 1
end
redis.call('ZADD', key, 'XX', str(now + ttl), id)
local newest = tonumber(redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2])
redis.call('PEXPIRE', key, str(newest - now))
return 1
