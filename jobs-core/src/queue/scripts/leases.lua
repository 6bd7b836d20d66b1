-- leases: renew or free the holds of running jobs (see lib/holds.lua).
-- KEYS     the held keys
-- ARGV[1]  'renew' or 'free'
-- ARGV[2]  the lease in milliseconds: a renewed hold lasts this long from now (Redis's clock)
-- ARGV[3..] the owner of each key, in the order of KEYS
-- Returns how many holds were still held (renew) or 0 (free).
-- Renewing is how a live worker keeps what its running jobs hold, the way extend.lua keeps
-- their reservations: a hold whose worker died runs out within one lease.
if ARGV[1] == 'free' then
  free_holds(1, 3)
  return 0
end
local lease = tonumber(ARGV[2])
local expires = now_millis() + lease
local held = 0
for i, key in ipairs(KEYS) do
  local owner = ARGV[2 + i]
  local kind = redis.call('type', key)['ok']
  if kind == 'string' then
    if redis.call('get', key) == owner then
      redis.call('pexpire', key, lease)
      held = held + 1
    end
  elseif kind == 'zset' then
    if redis.call('zscore', key, owner) then
      redis.call('zadd', key, expires, owner)
      redis.call('pexpire', key, lease)
      held = held + 1
    end
  end
end
return held
