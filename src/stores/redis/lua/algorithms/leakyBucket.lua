-- Leaky bucket: a line-for-line port of src/algorithms/leaky-bucket.ts.
-- Params: p1 rate, p2 periodMs, p3 capacity, p4 mode (0 reject, 1 delay).
-- State: packed doubles (level, tsMs). step returns delayMs (6th value) only in delay mode.
local LB_FIELDS = { 'level', 'ts' }
local function leakyBucketLeakMs(units, rate, periodMs)
  return (units * periodMs) / rate
end

local function leakyBucketFitSlack(ts, rate, periodMs)
  return FIT_EPSILON + (2 * abs(ts) * DBL_EPSILON * rate) / periodMs
end

ALG[CODE_LEAKY_BUCKET] = {
  load = function(key)
    return loadNumbers(key, LB_FIELDS, CODE_LEAKY_BUCKET)
  end,

  step = function(s, now, cost, rate, periodMs, capacity, mode)
    local level, ts
    if s == nil then
      level = 0
      ts = now
    else
      local elapsed = max(0, now - s.ts)
      level = max(0, s.level - (elapsed * rate) / periodMs)
      ts = max(s.ts, now)
    end
    if cost > capacity then
      return { level = level, ts = ts }, STATUS_INVALID_POLICY, max(0, capacity - level), 0,
        ts - now + leakyBucketLeakMs(level, rate, periodMs)
    end
    local lag = ts - now
    if level + cost <= capacity + leakyBucketFitSlack(ts, rate, periodMs) then
      local after = min(capacity, level + cost)
      local delay = nil
      if mode == 1 then delay = lag + leakyBucketLeakMs(level, rate, periodMs) end
      return { level = after, ts = ts }, STATUS_OK, capacity - after, 0,
        lag + leakyBucketLeakMs(after, rate, periodMs), delay
    end
    return { level = level, ts = ts }, STATUS_OVER_LIMIT, max(0, capacity - level),
      lag + leakyBucketLeakMs(level + cost - capacity, rate, periodMs),
      lag + leakyBucketLeakMs(level, rate, periodMs)
  end,

  save = function(key, s, now, ttl)
    -- the state is as of s.ts (later than now after backwards time) and empties within
    -- ttl of it: expire from there
    setState(key, spack('<Bdd', CODE_LEAKY_BUCKET, s.level, s.ts), ttl + max(0, s.ts - now))
  end,
}

-- refundState() of src/algorithms/refund.ts: leak to now, then take cost out (floored at 0).
ALG[CODE_LEAKY_BUCKET].refund = function(key, s, now, at, cost, ttl, rate, periodMs)
  local elapsed = max(0, now - s.ts)
  local level = max(0, s.level - (elapsed * rate) / periodMs)
  ALG[CODE_LEAKY_BUCKET].save(key, { level = max(0, level - cost), ts = max(s.ts, now) }, now, ttl)
end

-- The charge of a settle's excess (settle() of src/algorithms/leaky-bucket.ts): leak to
-- now, then add `units`, up to capacity + maxDebt, never below what it held. Returns the
-- units not charged. Kept until the level has leaked out.
ALG[CODE_LEAKY_BUCKET].charge = function(key, s, now, units, maxDebt, ttl, rate, periodMs, capacity)
  local level, ts = 0, now
  if s ~= nil then
    level = max(0, s.level - (max(0, now - s.ts) * rate) / periodMs)
    ts = max(s.ts, now)
  end
  local wanted = level + units
  local nextLevel = max(level, min(wanted, capacity + maxDebt))
  setState(key, spack('<Bdd', CODE_LEAKY_BUCKET, nextLevel, ts),
    max(ttl, leakyBucketLeakMs(nextLevel, rate, periodMs)) + max(0, ts - now))
  return wanted - nextLevel
end
