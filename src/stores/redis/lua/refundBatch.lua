--[[
refundBatch: give back what an admitted applyBatches batch consumed, in one atomic step.
Used when a check spans several Redis Cluster slots and a later slot denies (see
src/stores/redis/cross-slot.ts). The per-algorithm rules are those of refundState() in
src/algorithms/refund.ts; each is bounded (capacity never above its maximum, counts never
below zero).

KEYS[i]   the bucket key of item i (every key in one hash slot); with a request id, one
          more key last: the request id's refund marker
ARGV[1]   now in ms, or '' to read the Redis server clock (TIME)
ARGV[2]   marker TTL in ms (used only with a marker key): a refund already done under this
          marker is not done again
ARGV[3..] 8 fields per item: algorithm code, cost, ttlMs, consumedAtMs (the last field of
          the applyBatches reply), p1, p2, p3, p4

Reply     5 fields per item (status, then %.17g strings; '' for no delay): a cost-0 read of the bucket after the refund.
          On a domain failure: { -1, item }, the item's key holds something that is not
          Sluice state (nothing is written then).
]]
local ALG = {}
--- @include "includes/constants"
--- @include "includes/common"
--- @include-algorithms

bindApi()

local now = ARGV[1] == '' and serverNowMs() or tonumber(ARGV[1])

local n = (#ARGV - REFUND_FIRST_ARG + 1) / REFUND_ITEM_ARGS
local marker = KEYS[n + 1]
local done = marker ~= nil and rcall('EXISTS', marker) == 1

local items = {}
for i = 1, n do
  local b = REFUND_FIRST_ARG + (i - 1) * REFUND_ITEM_ARGS
  items[i] = {
    key = KEYS[i], alg = ALG[tonumber(ARGV[b])], cost = tonumber(ARGV[b + 1]),
    ttl = tonumber(ARGV[b + 2]), at = tonumber(ARGV[b + 3]),
    p1 = tonumber(ARGV[b + 4]), p2 = tonumber(ARGV[b + 5]),
    p3 = tonumber(ARGV[b + 6]), p4 = tonumber(ARGV[b + 7]),
  }
  -- check every key before writing any, so a foreign value leaves the batch untouched
  local _, ok = items[i].alg.load(items[i].key)
  if not ok then return { NOT_SLUICE_STATE, i } end
end

local reply = {}
for i = 1, n do
  local it = items[i]
  if not done and it.cost > 0 then
    local s = it.alg.load(it.key)
    if s ~= nil then it.alg.refund(it.key, s, now, it.at, it.cost, it.ttl, it.p1, it.p2, it.p3, it.p4) end
  end
end
readBack(items, n, now, reply)
flushStates()
if marker ~= nil and not done then rcall('SET', marker, '1', 'PX', ARGV[2]) end
return reply
