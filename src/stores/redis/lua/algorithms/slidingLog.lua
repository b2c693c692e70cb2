-- Sliding log: a line-for-line port of src/algorithms/sliding-log.ts.
-- Params: p1 limit, p2 windowMs. State: a sorted set per bucket, one member per admitted
-- request with cost > 0: score = its time tMs, member "<fmt(tMs)>:<cost>:<n>" where n is
-- the number of entries already at that score when it was added. In Lua the state is
-- { entries = { { tMs, cost }, ... } }, oldest first, like the TS entries array.
--
-- Why the member is unique and deterministic: entries stamped at one instant expire
-- together (same tMs, same expiry), so the entries at a score are never a partial group
-- and n counts exactly the members already there. A new entry is stamped at
-- max(now, newest tMs) (TS rule for backwards time), never before a live entry and
-- strictly after every expired one (expired: tMs + windowMs <= now, windowMs >= 1), and
-- save removes the expired ones before it adds: so no member is ever reused. Duplicate
-- keys in one batch chain their states: each admitted item's state is the previous one
-- plus its own entry, so each save adds that last entry, with n counted in that state.

-- An entry counts for exactly windowMs: from tMs until tMs + windowMs, exclusive.
local function slidingLogExpiresAt(e, windowMs)
  return e[1] + windowMs
end

ALG[CODE_SLIDING_LOG] = {
  load = function(key)
    -- a string state written earlier in this call (another algorithm's) is in Redis first
    flushState(key)
    local r = rpcall('ZRANGE', key, 0, -1, 'WITHSCORES')
    if r.err then return nil, false end
    if #r == 0 then return nil, true end
    local entries = {}
    for i = 1, #r, 2 do
      local t = tonumber(r[i + 1])
      local cost = tonumber(string.match(r[i], '^[^:]+:([^:]+):%d+$') or '')
      -- Scores may be +-inf and tonumber reads 'nan' and 'inf': none is an entry.
      if t == nil or t == huge or t == -huge or cost == nil or cost < 1
        or cost ~= floor(cost) or cost == huge then
        return nil, false
      end
      entries[#entries + 1] = { t, cost }
    end
    return { entries = entries }, true
  end,

  step = function(state, now, cost, limit, windowMs)
    local log = state ~= nil and state.entries or {}
    -- Sorted by time, so the expired entries are a prefix.
    local firstLive = 1
    while firstLive <= #log and slidingLogExpiresAt(log[firstLive], windowMs) <= now do
      firstLive = firstLive + 1
    end
    -- A new table: the loaded state is re-read for the cost-0 report of a refused batch.
    local entries = {}
    local used = 0
    for i = firstLive, #log do
      entries[#entries + 1] = log[i]
      used = used + log[i][2]
    end
    local newest = entries[#entries]
    local function resetAfter(last)
      if last == nil then return 0 end
      return slidingLogExpiresAt(last, windowMs) - now
    end

    if cost > limit then
      return { entries = entries }, STATUS_INVALID_POLICY, max(0, limit - used), 0, resetAfter(newest)
    end
    -- Costs are whole units, so the comparison is exact: no FIT_EPSILON.
    if used + cost <= limit then
      -- Cost 0 only reads: no entry. After backwards time the entry is stamped at the
      -- newest entry's instant, so the log stays sorted.
      local nextEntries = entries
      if cost ~= 0 then
        nextEntries = {}
        for i = 1, #entries do nextEntries[i] = entries[i] end
        nextEntries[#nextEntries + 1] = { max(now, newest ~= nil and newest[1] or now), cost }
      end
      return { entries = nextEntries }, STATUS_OK, limit - used - cost, 0,
        resetAfter(nextEntries[#nextEntries])
    end
    -- The cost fits once enough of the oldest entries have expired: find the last of those.
    local freed = 0
    local i = 0
    while used - freed + cost > limit do
      i = i + 1
      freed = freed + entries[i][2]
    end
    return { entries = entries }, STATUS_OVER_LIMIT, max(0, limit - used),
      waitUntil(now, slidingLogExpiresAt(entries[i], windowMs)), resetAfter(newest)
  end,

  -- Called only for an admitted cost > 0, so the last entry is the one this step added.
  -- O(log n) per write, plus the expired members removed.
  save = function(key, s, now, ttl, limit, windowMs)
    local entries = s.entries
    local last = entries[#entries]
    -- Everything before the oldest live entry expired (a group with one stamp is all
    -- live or all expired). Bounded by that stamp, not by now - windowMs, which rounds
    -- differently from tMs + windowMs <= now.
    rcall('ZREMRANGEBYSCORE', key, '-inf', '(' .. fmt(entries[1][1]))
    local n = 0
    for j = #entries - 1, 1, -1 do
      if entries[j][1] ~= last[1] then break end
      n = n + 1
    end
    local t = fmt(last[1])
    -- Re-adding the same member with the same score is a no-op, so this is idempotent.
    rcall('ZADD', key, t, t .. ':' .. fmt(last[2]) .. ':' .. n)
    -- The key lives until its newest entry stops counting, and no longer.
    rcall('PEXPIRE', key, max(1, ceil(slidingLogExpiresAt(last, windowMs) - now)))
  end,
}

-- refundState() of src/algorithms/refund.ts: remove one entry of exactly cost units at the
-- earliest stamp >= at that has one. The members at that stamp are rewritten numbered
-- 0..k-2, so the numbering rule above (n = entries already at the score) still holds.
ALG[CODE_SLIDING_LOG].refund = function(key, s, now, at, cost)
  local entries = s.entries
  local pick = nil
  for i = 1, #entries do
    local e = entries[i]
    if e[1] >= at and e[2] == cost and (pick == nil or e[1] < entries[pick][1]) then pick = i end
  end
  if pick == nil then return end
  local t = entries[pick][1]
  local ft = fmt(t)
  rcall('ZREMRANGEBYSCORE', key, ft, ft)
  local n = 0
  for i = 1, #entries do
    if i ~= pick and entries[i][1] == t then
      rcall('ZADD', key, ft, ft .. ':' .. fmt(entries[i][2]) .. ':' .. n)
      n = n + 1
    end
  end
end

-- settle() of src/algorithms/sliding-log.ts, whole (the log's give-back is not a refund):
-- below the estimate, the reservation's live entry (as the refund picks it, among the
-- entries still counting at now) keeps only `actual` units at its stamp (it goes at 0);
-- above, the excess is a new entry stamped as an admission is, while the live log stays
-- within limit + maxDebt. Returns the units not charged.
ALG[CODE_SLIDING_LOG].settle = function(key, s, now, at, estimate, actual, maxDebt, ttl, limit, windowMs)
  local entries = s ~= nil and s.entries or {}
  local delta = actual - estimate
  if delta < 0 then
    local pick = nil
    for i = 1, #entries do
      local e = entries[i]
      if slidingLogExpiresAt(e, windowMs) > now and e[1] >= at and e[2] == estimate
        and (pick == nil or e[1] < entries[pick][1]) then pick = i end
    end
    if pick == nil then return 0 end
    local t = entries[pick][1]
    local ft = fmt(t)
    rcall('ZREMRANGEBYSCORE', key, ft, ft)
    local n = 0
    for i = 1, #entries do
      if entries[i][1] == t then
        local c = entries[i][2]
        if i == pick then c = actual end
        if c > 0 then
          rcall('ZADD', key, ft, ft .. ':' .. fmt(c) .. ':' .. n)
          n = n + 1
        end
      end
    end
    return 0
  end
  if delta == 0 then return 0 end
  local used, newest = 0, nil
  for i = 1, #entries do
    if slidingLogExpiresAt(entries[i], windowMs) > now then
      used = used + entries[i][2]
      newest = entries[i][1]
    end
  end
  local charged = max(0, min(delta, limit + maxDebt - used))
  if charged > 0 then
    local t = max(now, newest or now)
    local n = 0
    for i = 1, #entries do
      if entries[i][1] == t then n = n + 1 end
    end
    local ft = fmt(t)
    rcall('ZADD', key, ft, ft .. ':' .. fmt(charged) .. ':' .. n)
    rcall('PEXPIRE', key, max(1, ceil(t + windowMs - now)))
  end
  return delta - charged
end
