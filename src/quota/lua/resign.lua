-- Gives the leader key up only while it holds this term.
-- KEYS: leader. ARGV: held value. Returns 1, or 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
