-- Takes the leader key if free and raises the fencing token in the same step:
-- the larger of the stored token + 1 and the floor the candidate brings (ARGV[3]).
-- KEYS: leader, token. ARGV: id, ttl ms, floor. Returns the new token, or 0.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local token = math.max((tonumber(redis.call('GET', KEYS[2])) or 0) + 1, tonumber(ARGV[3]))
  token = string.format('%.0f', token)
  redis.call('SET', KEYS[2], token)
  redis.call('SET', KEYS[1], token .. ':' .. ARGV[1], 'PX', ARGV[2])
  return token
end
return 0
