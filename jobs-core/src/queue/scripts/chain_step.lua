-- chain_step: on a Redis Cluster, take a chain's step for a link that settled, once per link
-- uuid: the link owed (the next one, or the catch job) is recorded under the link's uuid, so a
-- link run again after a crash gets the same one, which push_once.lua pushes once.
-- KEYS[1]  jobs:chain:<id>          list: the links still to run
-- KEYS[2]  jobs:chain:<id>:catch    string: the catch link
-- KEYS[3]  jobs:chain:<id>:owed     hash: link uuid -> the link it owes ('' none)
-- ARGV[1]  'done' or 'failed'
-- ARGV[2]  the settled link's uuid
-- done:    ARGV[3] a link its handler prepended, to run next ('' none: the head of the list),
--          then how many links go in front of the list and those links, how many are
--          appended and those links
-- failed:  ARGV[3] how long to keep the rest of the chain, in seconds
-- Returns the link owed, or '' for none.
local owed = redis.call('hget', KEYS[3], ARGV[2])
if owed then
  return owed
end
local at = effects_from(1, 3)
if ARGV[1] == 'done' then
  local next = at.next_arg()
  local front = at.next_args(tonumber(at.next_arg()))
  local back = at.next_args(tonumber(at.next_arg()))
  if #back > 0 then
    redis.call('rpush', KEYS[1], unpack(back))
  end
  if next == '' then
    next = redis.call('lpop', KEYS[1]) or ''
  end
  for i = #front, 1, -1 do
    redis.call('lpush', KEYS[1], front[i])
  end
  if next ~= '' then
    redis.call('persist', KEYS[1])
  elseif redis.call('llen', KEYS[1]) == 0 then
    redis.call('del', KEYS[1], KEYS[2])
  end
  owed = next
else
  owed = redis.call('get', KEYS[2]) or ''
  redis.call('del', KEYS[2])
  redis.call('expire', KEYS[1], tonumber(at.next_arg()))
end
redis.call('hset', KEYS[3], ARGV[2], owed)
redis.call('expire', KEYS[3], 86400)
return owed
