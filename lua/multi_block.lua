-- Entry of the script for checks whose policies have a penalty (docs/algorithms.md,
-- "Penalties"): all-or-nothing like multi.lua, one item being a single check.
-- KEYS[1..n] = state keys, KEYS[n + 1..2n] = their block keys;
-- ARGV = {now_ms, then per item: algorithm, limit, window_ms, burst, cost, block_for_ms}
-- (block_for 0: no penalty for that item). Every item is decided against the state before the
-- call; only if all are allowed are all written; each item its own window refused starts its
-- block whatever the others say. Returns the five integers of each item, in order.
local n = #KEYS / 2
if n < 1 or #KEYS ~= 2 * n or #ARGV ~= 1 + 6 * n then
  return redis.error_reply('ERR floodgate: multi_block takes 2n keys (n >= 1) and 1 + 6n ' ..
                           'arguments, got ' .. #KEYS .. ' and ' .. #ARGV)
end
local now, err = read_now(ARGV[1])
if now == nil then return redis.error_reply(err) end
local items, seen = {}, {}
for i = 1, n do
  local at = 1 + 6 * (i - 1)
  local decide = algorithms[ARGV[at + 1]]
  if decide == nil then
    return redis.error_reply(explain_item('algorithm', 'item ' .. i .. ' ', ARGV[at + 1]))
  end
  if seen[KEYS[i]] then
    return redis.error_reply('ERR floodgate: item ' .. i .. ' repeats the key of an earlier item')
  end
  seen[KEYS[i]] = true
  local l, w, b, cost = parse_item(ARGV[at + 2], ARGV[at + 3], ARGV[at + 4], ARGV[at + 5])
  if l == nil then
    return redis.error_reply(explain_item('item ' .. i .. ' ', ARGV[at + 2], ARGV[at + 3],
                                          ARGV[at + 4], ARGV[at + 5]))
  end
  local bf = ARGV[at + 6]
  if #bf > 16 or not find(bf, '^%d+$') or bf + 0 > max_value then
    return redis.error_reply('ERR floodgate: item ' .. i .. ' block_for_ms must be an ' ..
                             "integer in 0..1e15 (got '" .. sub(bf, 1, 32) .. "')")
  end
  items[i] = {decide, l, w, b, cost, bf + 0}
end
local out, writes, starts, all_allowed = {}, {}, {}, true
for i = 1, n do
  local it, base = items[i], 5 * (i - 1)
  local value, ttl, failed = it[1](KEYS[i], now, it[2], it[3], it[4], it[5], out, base)
  if failed then return failed end  -- nothing is written yet
  expand(out, base, it[4])
  local bf = it[6]
  if bf > 0 then
    starts[i] = penalize(out, base, it[5], block_left(KEYS[n + i], now, bf), bf)
  end
  if out[base + 1] == 0 then all_allowed = false end
  if value then writes[i] = {value, ttl} end
end
for i = 1, n do
  if all_allowed and writes[i] then write(KEYS[i], writes[i][1], writes[i][2]) end
  if starts[i] then
    redis.call('SET', KEYS[n + i], str(now + items[i][6]), 'PX', str(items[i][6]))
  end
end
return out
