-- penalty (docs/algorithms.md, "Penalties"): a key refused by its window stays refused for
-- block_for ms. The block is its own key holding its end time (now + block_for, on the clock
-- that decided), so no policy change can misread it; only the scripts of policies with a
-- penalty (multi_block.lua) include this file, so checks without one pay nothing for it.

-- The ms left of the block under `bkey` at now, at most bf (0: none). A block further away
-- (a reload shortened block_for, or the clock stepped back) is cut to end at now + bf, so it
-- ends when retry_after says.
local function block_left(bkey, now, bf)
  local s = redis.call('GET', bkey)
  if not s then return 0 end
  local left = s - now
  if left <= 0 then return 0 end
  if left > bf then
    redis.call('SET', bkey, str(now + bf), 'PX', str(bf))
    return bf
  end
  return left
end

-- Applies a block with `left` ms to go (0: none) to the window's decision in
-- out[at + 1 .. at + 5]. Returns true when a block of bf starts now (the window refused).
local function penalize(out, at, cost, left, bf)
  if left > 0 then
    -- Refused whatever the window says; a peek passes but learns nothing is left.
    out[at + 3] = 0
    if out[at + 4] < left then out[at + 4] = left end
    if cost > 0 then
      out[at + 1] = 0
      if out[at + 5] ~= -1 and out[at + 5] < left then out[at + 5] = left end
    end
    return false
  end
  if out[at + 1] == 0 and out[at + 5] ~= -1 then  -- refused by the window (never a peek)
    out[at + 3] = 0
    if out[at + 4] < bf then out[at + 4] = bf end
    if out[at + 5] < bf then out[at + 5] = bf end
    return true
  end
  return false
end
