--[[
applyBatches: decide several independent batches of bucket transitions in one script
call (RedisStore coalesces concurrent checks into one call). Each batch is atomic and
all-or-nothing, with the semantics of decideBatch() in src/stores/batch.ts; batches do
not affect each other's answers except through the buckets they share, in order.

KEYS      every batch's keys, one batch after another
ARGV[1]   M, the number of batches; then per batch: its key count, its argument count,
          and its arguments (one batch's keys and arguments: includes/applyOne.lua)

Reply     one reply per batch, in order: see includes/applyOne.lua.
]]
local ALG = {}
--- @include "includes/common"
--- @include "includes/tokenBucket"
--- @include "includes/gcra"
--- @include "includes/leakyBucket"
--- @include "includes/fixedWindow"
--- @include "includes/slidingWindowCounter"
--- @include "includes/slidingLog"
--- @include "includes/applyOne"

local nBatches = tonumber(ARGV[1])
local replies = {}
local k, a = 0, 1
for b = 1, nBatches do
  local nKeys, nArgs = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  replies[b] = applyOne(KEYS, ARGV, k, a + 2, nArgs)
  k = k + nKeys
  a = a + 2 + nArgs
end
return replies
