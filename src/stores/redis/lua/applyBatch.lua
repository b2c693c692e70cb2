--[[
applyBatch: decide a batch of bucket transitions in one atomic step, all-or-nothing.
The batch semantics are those of decideBatch() in src/stores/batch.ts.

KEYS[i]   the bucket key of item i (every key in one hash slot); with a request id, one
          more key last: the request id's dedup record
ARGV[1]   now in ms, or '' to read the Redis server clock (TIME)
ARGV[2]   request id ('' for none): a repeat within the dedup TTL returns the first reply
          and applies nothing
ARGV[3]   dedup TTL in ms
ARGV[4..] 8 fields per item: algorithm code, cost, enforce (1|0), ttlMs, p1, p2, p3, p4
          (codes and params: src/stores/redis/lua-args.ts)

Reply     5 fields per item: status (0 OK, 1 OVER_LIMIT, 2 INVALID_POLICY), remaining,
          retryAfterMs, resetAfterMs, delayMs ('' when absent); numbers as %.17g strings;
          then one last field: the now the batch was decided at (what refundBatch.lua
          needs to find the window or log entry of this consumption).
          On a domain failure: { -code, item } (decoded in src/stores/redis/reply.ts):
          -1 the item's key holds something that is not Sluice state.
]]
local ALG = {}
--- @include "includes/common"
--- @include "includes/tokenBucket"
--- @include "includes/gcra"
--- @include "includes/leakyBucket"
--- @include "includes/fixedWindow"
--- @include "includes/slidingWindowCounter"
--- @include "includes/slidingLog"

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
else
  now = tonumber(ARGV[1])
end

local FIRST = 4
local n = (#ARGV - FIRST + 1) / 8
local dedup = ARGV[2] ~= '' and KEYS[n + 1] or nil
if dedup then
  local seen, ok = getString(dedup)
  if not ok then return { -1, n + 1 } end
  if seen then
    -- the first reply, stored as its fields joined by newlines (none contains one)
    local reply, j = {}, 0
    for field in string.gmatch(seen .. '\n', '([^\n]*)\n') do
      if j % 5 == 0 then reply[j + 1] = tonumber(field) else reply[j + 1] = field end
      j = j + 1
    end
return reply
  end
end

local items = {}
local original = {} -- key -> state as read; ABSENT when there is none
local current = {}  -- key -> state after the admitted steps so far in this batch
local admitted = true
for i = 1, n do
  local b = FIRST + (i - 1) * 8
  local it = {
    key = KEYS[i], alg = ALG[tonumber(ARGV[b])], cost = tonumber(ARGV[b + 1]),
    enforce = ARGV[b + 2] == '1', ttl = tonumber(ARGV[b + 3]),
    p1 = tonumber(ARGV[b + 4]), p2 = tonumber(ARGV[b + 5]),
    p3 = tonumber(ARGV[b + 6]), p4 = tonumber(ARGV[b + 7]),
  }
  if original[it.key] == nil then
    local s, ok = it.alg.load(it.key, now, it.p1, it.p2, it.p3, it.p4)
    if not ok then return { -1, i } end
    original[it.key] = s == nil and ABSENT or s
    current[it.key] = original[it.key]
  end
  local s = current[it.key]
  if s == ABSENT then s = nil end
  it.state, it.status, it.remaining, it.retry, it.reset, it.delay =
    it.alg.step(s, now, it.cost, it.p1, it.p2, it.p3, it.p4)
  if it.status == 0 then current[it.key] = it.state end
  if it.enforce and it.status ~= 0 then admitted = false end
  items[i] = it
end

local reply = {}
for i = 1, n do
  local it = items[i]
  if admitted then
    -- a cost-0 request only reads: nothing to write
    if it.status == 0 and it.cost > 0 then it.alg.save(it.key, it.state, now, it.ttl, it.p1, it.p2, it.p3, it.p4) end
  elseif it.status == 0 then
    -- nothing is consumed: report the unconsumed capacity, as a cost-0 read of the original
    local s = original[it.key]
    if s == ABSENT then s = nil end
    local _
    _, it.status, it.remaining, it.retry, it.reset, it.delay =
      it.alg.step(s, now, 0, it.p1, it.p2, it.p3, it.p4)
  end
  local j = (i - 1) * 5
  reply[j + 1] = it.status
  reply[j + 2] = fmt(it.remaining)
  reply[j + 3] = fmt(it.retry)
  reply[j + 4] = fmt(it.reset)
  reply[j + 5] = it.delay == nil and '' or fmt(it.delay)
end
reply[n * 5 + 1] = fmt(now)
if dedup then redis.call('SET', dedup, table.concat(reply, '\n'), 'PX', ARGV[3]) end
return reply
