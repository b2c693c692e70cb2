-- Token bucket: a line-for-line port of src/algorithms/token-bucket.ts.
-- Params: p1 rate, p2 periodMs, p3 burst. State: packed doubles (tokens, tsMs).
local TB_FIELDS = { 'tokens', 'ts' }
local function tokenBucketFitSlack(ts, rate, periodMs)
  return FIT_EPSILON + (2 * math.abs(ts) * DBL_EPSILON * rate) / periodMs
end

ALG[1] = {
  load = function(key)
    return loadNumbers(key, TB_FIELDS, 1)
  end,

  step = function(s, now, cost, rate, periodMs, burst)
    local tokens, ts
    if s == nil then
      tokens = burst
      ts = now
    else
      local elapsed = math.max(0, now - s.ts)
      tokens = math.min(burst, s.tokens + (elapsed * rate) / periodMs)
      ts = math.max(s.ts, now)
    end
    if cost > burst then return { tokens = tokens, ts = ts }, 2, tokens, 0, 0 end
    local lag = ts - now
    if tokens + tokenBucketFitSlack(ts, rate, periodMs) >= cost then
      local left = math.max(0, tokens - cost)
      return { tokens = left, ts = ts }, 0, left, 0, lag + ((burst - left) * periodMs) / rate
    end
    return { tokens = tokens, ts = ts }, 1, tokens,
      lag + ((cost - tokens) * periodMs) / rate, lag + ((burst - tokens) * periodMs) / rate
  end,

  save = function(key, s, now, ttl)
    -- the state is as of s.ts (later than now after backwards time): expire from there
    setState(key, struct.pack('<Bdd', 1, s.tokens, s.ts), ttl + math.max(0, s.ts - now))
  end,
}

-- refundState() of src/algorithms/refund.ts: refill to now, then give cost back (capped).
ALG[1].refund = function(key, s, now, at, cost, ttl, rate, periodMs, burst)
  local elapsed = math.max(0, now - s.ts)
  local tokens = math.min(burst, s.tokens + (elapsed * rate) / periodMs)
  ALG[1].save(key, { tokens = math.min(burst, tokens + cost), ts = math.max(s.ts, now) }, now, ttl)
end
