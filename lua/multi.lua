-- Entry of the all-or-nothing script (docs/algorithms.md, "All-or-nothing").
-- KEYS[1..n]; ARGV = {now_ms, then per item: algorithm, limit, window_ms, burst, cost}.
-- Every item is decided against the state before the call; only if all are allowed are all
-- written. Returns the five integers of each item, in order.
local n = #KEYS
if n < 1 or #ARGV ~= 1 + 5 * n then
  return redis.error_reply('ERR floodgate: multi takes n >= 1 keys and 1 + 5n arguments, got ' ..
                           n .. ' and ' .. #ARGV)
end
local now, err = read_now(ARGV[1])
if now == nil then return redis.error_reply(err) end
-- Per item i: its decide function, then limit, window, burst and cost, at 5 * (i - 1) + 1..5.
local items, seen = {}, {}
for i = 1, n do
  local at = 1 + 5 * (i - 1)
  local decide = algorithms[ARGV[at + 1]]
  if decide == nil then
    return redis.error_reply(explain_item('algorithm', 'item ' .. i .. ' ', ARGV[at + 1]))
  end
  -- Two items on one key would both be decided against the same state.
  if seen[KEYS[i]] then
    return redis.error_reply('ERR floodgate: item ' .. i .. ' repeats the key of an earlier item')
  end
  seen[KEYS[i]] = true
  local l, w, b, cost = parse_item(ARGV[at + 2], ARGV[at + 3], ARGV[at + 4], ARGV[at + 5])
  if l == nil then
    return redis.error_reply(explain_item('item ' .. i .. ' ', ARGV[at + 2], ARGV[at + 3],
                                          ARGV[at + 4], ARGV[at + 5]))
  end
  local base = 5 * (i - 1)
  items[base + 1], items[base + 2], items[base + 3], items[base + 4], items[base + 5] =
      decide, l, w, b, cost
end
local out, writes, all_allowed = {}, {}, true
for i = 1, n do
  local base = 5 * (i - 1)
  local value, ttl, failed = items[base + 1](KEYS[i], now, items[base + 2], items[base + 3],
                                             items[base + 4], items[base + 5], out, base)
  if failed then return failed end  -- nothing is written yet
  expand(out, base, items[base + 4])
  if out[base + 1] == 0 then all_allowed = false end
  if value then writes[i] = {value, ttl} end
end
if all_allowed then
  for i = 1, n do
    local wr = writes[i]
    if wr then write(KEYS[i], wr[1], wr[2]) end
  end
end
return out
