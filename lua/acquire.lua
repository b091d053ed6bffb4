-- Entry of the acquire script (docs/algorithms.md, "Concurrency limits"): a sorted set of the
-- live leases, score = when the lease expires, member = its id. Leases whose time is up are
-- dropped first, so a crashed holder's slot comes back by itself.
-- KEYS[1] = lease set; ARGV = {limit, lease_ms, lease id, now_ms}.
-- Returns the five integers of a decision: allowed, limit, remaining (free slots after),
-- reset_after (until every lease has expired), retry_after (until the earliest expires).
if #KEYS ~= 1 or #ARGV ~= 4 then
  return redis.error_reply('ERR floodgate: acquire takes 1 key and 4 arguments (limit, ' ..
                           'lease_ms, lease, now_ms), got ' .. #KEYS .. ' and ' .. #ARGV)
end
local limit, ttl, id = ARGV[1], ARGV[2], ARGV[3]
if not find(limit .. ',' .. ttl, '^%d+,%d+$') or #limit > 16 or #ttl > 16 or limit + 0 < 1 or
    ttl + 0 < 1 or limit + 0 > max_value or ttl + 0 > max_value or #id < 1 or #id > 64 then
  return redis.error_reply("ERR floodgate: acquire wants limit and lease_ms in 1..1e15 and a " ..
                           "lease id of 1..64 bytes (got '" .. sub(limit, 1, 20) .. "', '" ..
                           sub(ttl, 1, 20) .. "', " .. #id .. ' bytes)')
end
limit, ttl = limit + 0, ttl + 0
local now, err = read_now(ARGV[4])
if now == nil then return redis.error_reply(err) end
local key = KEYS[1]
redis.call('ZREMRANGEBYSCORE', key, '-inf', str(now))
local held = redis.call('ZCARD', key)
local got = held < limit
if got then
  if redis.call('ZADD', key, 'NX', str(now + ttl), id) == 0 then
    return redis.error_reply('ERR floodgate: lease id already held')
  end
  held = held + 1
end
-- Not empty: it held `limit` >= 1 leases, or got one. The key lives as long as its newest.
local newest = tonumber(redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2])
redis.call('PEXPIRE', key, str(newest - now))
if got then return {1, limit, limit - held, newest - now, 0} end
local oldest = tonumber(redis.call('ZRANGE', key, '0', '0', 'WITHSCORES')[2])
return {0, limit, 0, newest - now, oldest - now}
