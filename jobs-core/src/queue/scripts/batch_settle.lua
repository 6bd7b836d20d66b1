-- batch_settle: on a Redis Cluster, count settled jobs in their batch, each once, and record
-- under each job's uuid what it owes (the callbacks that fell due when it was counted, the jobs
-- its handler added), so that a job run again after a crash gets the same jobs to push, which
-- push_once.lua pushes once each.
-- KEYS[1..4] the batch's record, pending set, failed set and callbacks (batch_owing_from in
--            lib/batch.lua)
-- KEYS[5]    jobs:batch:<id>:owed   hash: job uuid -> the links it owes, joined by NUL bytes
-- KEYS[6]    jobs:batch:<id>:parked list: the links of a batch that is a link of a chain
-- ARGV[1]    how long to keep the finished batch, in seconds (batch_owing_from)
-- ARGV[2]    'done', 'failed' or 'start'
-- ARGV[3..]  done: for each job, its uuid, how many jobs its handler added and for each its
--            uuid and link, how many links it added to its chain and their uuids
--            failed: the job's uuid, how many links of its chain leave the batch, their uuids
--            start: the uuid of the link before the batch in its chain, which reached it: the
--            parked jobs are owed, and the dispatch that parked them closes
-- Returns the links owed, in order.
local at = effects_from(1, 1)
local batch = batch_owing_from(at)
local owed_key = at.next_key()
local parked = at.next_key()
local mode = ARGV[2]
at.arg = 3
local all = {}
local function owe(uuid, settle)
  local known = redis.call('hget', owed_key, uuid)
  if known then
    if known ~= '' then
      for link in string.gmatch(known, '[^%z]+') do table.insert(all, link) end
    end
    return
  end
  batch.owed = {}
  settle()
  redis.call('hset', owed_key, uuid, table.concat(batch.owed, '\0'))
  for _, link in ipairs(batch.owed) do table.insert(all, link) end
end
while not at.done() do
  local uuid = at.next_arg()
  if mode == 'done' then
    local added = {}
    for i = 1, tonumber(at.next_arg()) do
      added[i] = { uuid = at.next_arg(), link = at.next_arg() }
    end
    local joined = at.next_args(tonumber(at.next_arg()))
    owe(uuid, function()
      if redis.call('exists', batch.record) == 0 then return end
      batch_join_added(batch, added, joined)
      for _, job in ipairs(added) do table.insert(batch.owed, job.link) end
      batch_count_done(batch, uuid)
      batch_check(batch)
    end)
  elseif mode == 'start' then
    owe(uuid, function()
      for _, link in ipairs(batch_unpark(batch, parked)) do
        table.insert(batch.owed, link)
      end
    end)
  else
    local leaving = at.next_args(tonumber(at.next_arg()))
    owe(uuid, function() batch_count_failed(batch, uuid, leaving) end)
  end
end
redis.call('expire', owed_key, 86400)
return all
