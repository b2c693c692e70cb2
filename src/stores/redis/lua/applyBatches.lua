--[[
applyBatches: decide several independent batches of bucket transitions in one script
call (RedisStore coalesces concurrent checks into one call). Each batch is atomic and
all-or-nothing, with the semantics of decideBatch() in src/stores/batch.ts; batches do
not affect each other's answers except through the buckets they share, in order.

Numbers travel packed (little-endian struct formats), in one string: no per-number
argument for the client to encode, nor for Redis to allocate and parse.

KEYS      every batch's keys, one batch after another (includes/applyOne.lua)
ARGV[1]   the batches, packed one after another: per batch a header '<BdHd' (flags: 1 the
          client's clock is given, 2 the batch has a request id, whose dedup key follows
          the batch's keys; now in ms; item count; dedup TTL in ms), then per item
          '<BddddddB' (algorithm code, ttlMs, p1..p4, cost, enforce 1|0)

Reply     one string: per batch a tag byte and a '<I4' length, then that many bytes:
          tag 0, the batch's decisions (includes/applyOne.lua); tag 1, '<I4' the 1-based
          item whose key holds something that is not Sluice state (nothing was written).
          Decoded in src/stores/redis/wire.ts and reply.ts.

The file defines applyBatches(KEYS, ARGV); scripts.ts adds the entry: `return
applyBatches(KEYS, ARGV)` for EVALSHA, or registers it as a function of a Redis Functions
library (Redis 7+), which defines the algorithms once at load instead of on every call.
Code outside functions therefore runs at library load, where only part of the API exists
(no `struct`, no `redis.call`).
]]
local ALG = {}
--- @include "includes/constants"
--- @include "includes/common"
--- @include-algorithms
--- @include "includes/applyOne"

local function applyBatches(KEYS, ARGV)
  -- (a function library keeps its upvalues between calls: each call reads TIME afresh)
  bindApi()
  cachedServerNow = nil
  resetStates()
  local blob = ARGV[1]
  local pos, k = 1, 0
  local replies = {}
  local b = 0
  while pos <= #blob do
    local flags, now, n, dedupTtl
    flags, now, n, dedupTtl, pos = sunpack(BATCH_HEADER, blob, pos)
    if band(flags, FLAG_CLIENT_CLOCK) == 0 then now = serverNowMs() end
    local dedup = nil
    if band(flags, FLAG_DEDUP) ~= 0 then dedup = KEYS[k + n + 1] end
    b = b + 1
    replies[b], pos = applyOne(KEYS, k, blob, pos, n, now, dedup, dedupTtl)
    k = k + n
    if dedup then k = k + 1 end
  end
  flushStates()
  return concat(replies)
end
