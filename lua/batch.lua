-- Entry of the batch script: many independent checks in one call (docs/algorithms.md,
-- "Batches"). The client sends the checks queued on one connection this way, so Redis pays
-- the per-call cost (EVALSHA, TIME) once for all of them.
--
-- KEYS[1..n]; ARGV = {now_ms, then runs: algorithm, limit, window_ms, burst, cost, count}.
-- A run gives the policy and cost of the next `count` items (counts add up to n): checks of
-- one policy usually queue together, and each argument costs Redis a string object and a Lua
-- string, so a run of 25 carries 6 arguments instead of 125.
--
-- Items are decided and written one after another at the same now, exactly as n calls of
-- the per-algorithm scripts in that order would be: an item sees what earlier items on its
-- key wrote. The reply is flat, two or three integers an item, since each element of it costs
-- Redis as much as a few Lua operations:
--   allowed:  remaining, reset_after
--   denied:   -1 - remaining, reset_after, retry_after (-1: never)
--   refused:  one error (arguments refused, or the key holds another type); the others count.
-- The limit is not sent back: the client knows it (the policy's limit, or burst for
-- token_bucket and gcra).
local n, nargs = #KEYS, #ARGV
if n < 1 or nargs < 7 or (nargs - 1) % 6 ~= 0 then
  return redis.error_reply('ERR floodgate: batch takes n >= 1 keys and 1 + 6 arguments a run, ' ..
                           'got ' .. n .. ' and ' .. nargs)
end
local total = 0
for a = 7, nargs, 6 do
  local c = ARGV[a]
  if #c > 6 or not find(c, '^[1-9]%d*$') then total = -1 break end
  total = total + c
end
if total ~= n then
  return redis.error_reply('ERR floodgate: batch run counts must be positive and add up to ' ..
                           n .. ' keys')
end
local now, err = read_now(ARGV[1])
if now == nil then return redis.error_reply(err) end
local out, k, i = {}, 0, 0  -- k: elements written; i: items done
for a = 2, nargs, 6 do
  local decide = algorithms[ARGV[a]]
  local l, w, b, cost = parse_item(ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4])
  local last = i + ARGV[a + 5]
  if decide == nil or l == nil then
    local message
    if decide == nil then
      message = explain_item('algorithm', 'items ' .. i + 1 .. '..' .. last .. ' ', ARGV[a])
    else
      message = explain_item('items ' .. i + 1 .. '..' .. last .. ' ', ARGV[a + 1], ARGV[a + 2],
                             ARGV[a + 3], ARGV[a + 4])
    end
    local refused = redis.error_reply(message)
    for _ = i + 1, last do
      k = k + 1
      out[k] = refused
    end
  else
    for j = i + 1, last do
      local key = KEYS[j]
      -- The decision lands at out[k + 1 ..], two integers or three (put).
      local value, ttl, failed = decide(key, now, l, w, b, cost, out, k)
      if failed then
        k = k + 1
        out[k] = failed
      else
        -- Written at once, so a later item on the same key sees it (write() inline: a call
        -- per item costs more than these lines).
        if value then
          if ttl == nil then
            value()
          elseif ttl < 0 then
            if type(redis.pcall('INCRBY', key, value)) == 'table' then
              add_without_incrby(key, value)
            end
          else
            redis.call('SET', key, value, 'PX', format('%d', ttl))
          end
        end
        if out[k + 1] >= 0 then k = k + 2 else k = k + 3 end
      end
    end
  end
  i = last
end
return out
