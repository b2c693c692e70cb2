-- One batch, all-or-nothing (decideBatch() in src/stores/batch.ts). The batch's keys are
-- KEYS[ko + 1 ...] and its nArgs arguments ARGV[ao + 1 ...], read in place (a copy costs
-- table allocations, the dearest thing in a script). Keys: the bucket keys, then the
-- dedup key when there is a request id. Arguments: [1] now in ms or '' for the server
-- clock, [2] request id or '', [3] dedup TTL in ms, then 8 fields per item (algorithm
-- code, cost, enforce 1|0, ttlMs, p1..p4).
--
-- Reply: one binary string, per item struct '<Bdddd' (status 0 OK / 1 OVER_LIMIT /
-- 2 INVALID_POLICY, remaining, retryAfterMs, resetAfterMs, delayMs or NaN when absent),
-- then '<d' the now the batch was decided at (what refundBatch.lua needs to find the
-- window or log entry of this consumption):
-- doubles travel exactly, and one pack costs Redis far less than formatting numbers as
-- text. A domain failure is { -1, item }: that item's key holds something that is not
-- Sluice state. Decoded in src/stores/redis/reply.ts.
local NAN = 0 / 0
local ITEM = '<Bdddd'

local function packItem(status, remaining, retry, reset, delay)
  if delay == nil then delay = NAN end
  return struct.pack(ITEM, status, remaining, retry, reset, delay)
end

local function applyOne(KEYS, ARGV, ko, ao, nArgs)
  local now
  if ARGV[ao + 1] == '' then
    now = serverNowMs()
  else
    now = tonumber(ARGV[ao + 1])
  end

  local FIRST = 4
  local n = (nArgs - FIRST + 1) / 8
  local dedup = ARGV[ao + 2] ~= '' and KEYS[ko + n + 1] or nil

  if n == 1 and not dedup then
    -- One policy, no request id: the common check, without the batch bookkeeping.
    local alg = ALG[tonumber(ARGV[ao + 4])]
    local cost = tonumber(ARGV[ao + 5])
    local p1, p2, p3, p4 = tonumber(ARGV[ao + 8]), tonumber(ARGV[ao + 9]), tonumber(ARGV[ao + 10]), tonumber(ARGV[ao + 11])
    local key = KEYS[ko + 1]
    local s, ok = alg.load(key, now, p1, p2, p3, p4)
    if not ok then return { -1, 1 } end
    local state, status, remaining, retry, reset, delay = alg.step(s, now, cost, p1, p2, p3, p4)
    -- a cost-0 request only reads: nothing to write
    if status == 0 and cost > 0 then alg.save(key, state, now, tonumber(ARGV[ao + 7]), p1, p2, p3, p4) end
    return packItem(status, remaining, retry, reset, delay) .. struct.pack('<d', now)
  end

  if dedup then
    local seen, ok = getString(dedup)
    if not ok then return { -1, n + 1 } end
    -- the first reply, stored as it was sent
    if seen then return seen end
  end

  local items = {}
  local original = {} -- key -> state as read; ABSENT when there is none
  local current = {}  -- key -> state after the admitted steps so far in this batch
  local admitted = true
  for i = 1, n do
    local b = FIRST + (i - 1) * 8
    local it = {
      key = KEYS[ko + i], alg = ALG[tonumber(ARGV[ao + b])], cost = tonumber(ARGV[ao + b + 1]),
      enforce = ARGV[ao + b + 2] == '1', ttl = tonumber(ARGV[ao + b + 3]),
      p1 = tonumber(ARGV[ao + b + 4]), p2 = tonumber(ARGV[ao + b + 5]),
      p3 = tonumber(ARGV[ao + b + 6]), p4 = tonumber(ARGV[ao + b + 7]),
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
    reply[i] = packItem(it.status, it.remaining, it.retry, it.reset, it.delay)
  end
  reply[n + 1] = struct.pack('<d', now)
  local packed = table.concat(reply)
  if dedup then redis.call('SET', dedup, packed, 'PX', ARGV[ao + 3]) end
  return packed
end
