-- Deleting failed-job records by age, shared by fail.lua (which prunes a little on every
-- failure) and prune_failed.lua (which operators call).

-- Deletes at most `limit` records of the failed-job hash `hash` whose score in the index
-- `index` is at most `cutoff`; returns how many it deleted.
local function forget_failed_before(hash, index, cutoff, limit)
  local old = redis.call('zrangebyscore', index, '-inf', cutoff, 'limit', 0, limit)
  if #old > 0 then
    redis.call('hdel', hash, unpack(old))
    redis.call('zrem', index, unpack(old))
  end
  return #old
end
