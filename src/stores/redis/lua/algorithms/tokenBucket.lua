-- Token bucket: a line-for-line port of src/algorithms/token-bucket.ts.
-- Params: p1 rate, p2 periodMs, p3 burst. State: packed doubles (tokens, tsMs).
local TB_FIELDS = { 'tokens', 'ts' }
local function tokenBucketFitSlack(ts, rate, periodMs)
  return FIT_EPSILON + (2 * abs(ts) * DBL_EPSILON * rate) / periodMs
end

-- The step on scalars: tokens0 and ts0 are the state's, both nil when there is none.
-- Returns the next state (tokens, ts), then status, remaining, retryAfterMs, resetAfterMs.
local function tokenBucketStep(tokens0, ts0, now, cost, rate, periodMs, burst)
  local tokens, ts
  if tokens0 == nil then
    tokens = burst
    ts = now
  else
    local elapsed = max(0, now - ts0)
    tokens = min(burst, tokens0 + (elapsed * rate) / periodMs)
    ts = max(ts0, now)
  end
  if cost > burst then
    return tokens, ts, STATUS_INVALID_POLICY, max(0, tokens), 0, ts - now + ((burst - tokens) * periodMs) / rate
  end
  local lag = ts - now
  if tokens + tokenBucketFitSlack(ts, rate, periodMs) >= cost then
    local left = max(0, tokens - cost)
    return left, ts, STATUS_OK, left, 0, lag + ((burst - left) * periodMs) / rate
  end
  -- below zero only after a settle charged a debt: none is left to report
  return tokens, ts, STATUS_OVER_LIMIT, max(0, tokens),
    lag + ((cost - tokens) * periodMs) / rate, lag + ((burst - tokens) * periodMs) / rate
end

local function tokenBucketSave(key, tokens, ts, now, ttl)
  -- the state is as of ts (later than now after backwards time): expire from there
  setState(key, spack('<Bdd', CODE_TOKEN_BUCKET, tokens, ts), ttl + max(0, ts - now))
end

ALG[CODE_TOKEN_BUCKET] = {
  load = function(key)
    return loadNumbers(key, TB_FIELDS, CODE_TOKEN_BUCKET)
  end,

  step = function(s, now, cost, rate, periodMs, burst)
    local tokens, ts, status, remaining, retry, reset
    if s == nil then
      tokens, ts, status, remaining, retry, reset =
        tokenBucketStep(nil, nil, now, cost, rate, periodMs, burst)
    else
      tokens, ts, status, remaining, retry, reset =
        tokenBucketStep(s.tokens, s.ts, now, cost, rate, periodMs, burst)
    end
    return { tokens = tokens, ts = ts }, status, remaining, retry, reset
  end,

  save = function(key, s, now, ttl)
    tokenBucketSave(key, s.tokens, s.ts, now, ttl)
  end,

  -- A one-request batch: load, step and save on scalars, with no table per check.
  -- Returns (ok, status, remaining, retryAfterMs, resetAfterMs); ok as for load.
  decide = function(key, now, cost, ttl, rate, periodMs, burst)
    local ok, present, tokens0, ts0 = loadPacked(key, CODE_TOKEN_BUCKET, 2)
    if not ok then return false end
    if not present then tokens0, ts0 = nil, nil end
    local tokens, ts, status, remaining, retry, reset =
      tokenBucketStep(tokens0, ts0, now, cost, rate, periodMs, burst)
    -- a cost-0 request only reads: nothing to write
    if status == STATUS_OK and cost > 0 then tokenBucketSave(key, tokens, ts, now, ttl) end
    return true, status, remaining, retry, reset
  end,
}

-- refundState() of src/algorithms/refund.ts: refill to now, then give cost back (capped).
ALG[CODE_TOKEN_BUCKET].refund = function(key, s, now, at, cost, ttl, rate, periodMs, burst)
  local elapsed = max(0, now - s.ts)
  local tokens = min(burst, s.tokens + (elapsed * rate) / periodMs)
  ALG[CODE_TOKEN_BUCKET].save(key, { tokens = min(burst, tokens + cost), ts = max(s.ts, now) }, now, ttl)
end

-- The charge of a settle's excess (settle() of src/algorithms/token-bucket.ts): refill to
-- now, then take `units`, down to -maxDebt tokens at most, never above what it had.
-- Returns the units not charged. Kept until the debt is refilled too.
ALG[CODE_TOKEN_BUCKET].charge = function(key, s, now, units, maxDebt, ttl, rate, periodMs, burst)
  local tokens, ts = burst, now
  if s ~= nil then
    tokens = min(burst, s.tokens + (max(0, now - s.ts) * rate) / periodMs)
    ts = max(s.ts, now)
  end
  local wanted = tokens - units
  local left = min(tokens, max(-maxDebt, wanted))
  tokenBucketSave(key, left, ts, now, ttl + (max(0, -left) * periodMs) / rate)
  return left - wanted
end
