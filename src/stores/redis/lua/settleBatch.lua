--[[
settleBatch: settle a reservation's buckets of one hash slot, in one atomic step, once per
reservation id (src/stores/redis/settle-call.ts). The per-algorithm rules are those of
each algorithm's settle() in src/algorithms/: below the estimate the difference comes back
(the algorithm's refund; the sliding log's own settle), above it the excess is charged
(the algorithm's charge), down to maxDebt below empty.

KEYS[i]   the bucket key of item i (every key in one hash slot), then one more key last:
          the reservation id's settle marker
ARGV[1]   now in ms, or '' to read the Redis server clock (TIME)
ARGV[2]   marker TTL in ms: a settle already done under this marker is not done again
ARGV[3]   reservedAtMs: when the reservation took its units
ARGV[4..] 9 fields per item: algorithm code, estimate, actual, maxDebt, ttlMs, p1, p2, p3, p4

Reply     5 fields per item as refundBatch's (a cost-0 read of the bucket after the
          settle), then per item the units not charged (%.17g), then 1 when the marker
          was already set (nothing was done), else 0.
          On a domain failure: { -1, item }, the item's key holds something that is not
          Sluice state (nothing is written then).
]]
local ALG = {}
--- @include "includes/constants"
--- @include "includes/common"
--- @include-algorithms

bindApi()

local now = ARGV[1] == '' and serverNowMs() or tonumber(ARGV[1])
local at = tonumber(ARGV[3])

local n = (#ARGV - SETTLE_FIRST_ARG + 1) / SETTLE_ITEM_ARGS
local marker = KEYS[n + 1]
local done = rcall('EXISTS', marker) == 1

local items = {}
for i = 1, n do
  local b = SETTLE_FIRST_ARG + (i - 1) * SETTLE_ITEM_ARGS
  items[i] = {
    key = KEYS[i], alg = ALG[tonumber(ARGV[b])], estimate = tonumber(ARGV[b + 1]),
    actual = tonumber(ARGV[b + 2]), maxDebt = tonumber(ARGV[b + 3]), ttl = tonumber(ARGV[b + 4]),
    p1 = tonumber(ARGV[b + 5]), p2 = tonumber(ARGV[b + 6]),
    p3 = tonumber(ARGV[b + 7]), p4 = tonumber(ARGV[b + 8]),
  }
  -- check every key before writing any, so a foreign value leaves the batch untouched
  local _, ok = items[i].alg.load(items[i].key)
  if not ok then return { NOT_SLUICE_STATE, i } end
end

-- One item's settle; the units not charged.
local function settleOne(it)
  local alg = it.alg
  local s = alg.load(it.key)
  if alg.settle ~= nil then
    return alg.settle(it.key, s, now, at, it.estimate, it.actual, it.maxDebt, it.ttl,
      it.p1, it.p2, it.p3, it.p4)
  end
  local delta = it.actual - it.estimate
  if delta < 0 then
    if s ~= nil then alg.refund(it.key, s, now, at, -delta, it.ttl, it.p1, it.p2, it.p3, it.p4) end
    return 0
  end
  if delta > 0 then
    return alg.charge(it.key, s, now, delta, it.maxDebt, it.ttl, it.p1, it.p2, it.p3, it.p4)
  end
  return 0
end

local capped = {}
for i = 1, n do
  if done then capped[i] = 0 else capped[i] = settleOne(items[i]) end
end
local reply = {}
readBack(items, n, now, reply)
for i = 1, n do reply[n * REFUND_REPLY_FIELDS + i] = fmt(capped[i]) end
reply[n * REFUND_REPLY_FIELDS + n + 1] = done and 1 or 0
flushStates()
if not done then rcall('SET', marker, '1', 'PX', ARGV[2]) end
return reply
