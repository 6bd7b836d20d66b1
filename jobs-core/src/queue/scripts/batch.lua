-- batch: create a batch, or add jobs to one, and push them, in one step: a job is counted in
-- its batch in the call that pushes it. A dispatch of many jobs comes in parts; the batch
-- cannot finish while a dispatch is under way (its `open` count), so jobs of its first part
-- that finish early cannot fire its callbacks before the last part is in.
-- KEYS[1..10] the batch's keys and its callbacks' routes (batch_from in lib/batch.lua)
-- KEYS[11]    jobs:batches   zset: batch id -> created_at
-- KEYS[12]    jobs:batches:running   zset: the same, for batches not known to have finished
-- KEYS[13]    jobs:batch:<id>:parked   list: the first links of a batch that is a link of a chain,
--             kept until the chain reaches it (batch_start in lib/batch.lua)
-- KEYS[14..]  for each job: its ready list (or delayed set when it has a due time), its
--             queue's notify, and for the first link of a chain its chain's list and catch keys
--             (for any other job, two keys of the batch that are not used)
-- ARGV[1..4]  batch_from's: the callbacks' due times, how long to keep the finished batch
-- ARGV[5]     'create' (this dispatch creates the batch), 'add' (it adds to a batch, which
--             must be neither finished nor cancelled), or 'more' (a later part of either)
-- ARGV[6]     '1' when this is the dispatch's last part, else '0'
-- ARGV[7]     the batch id
-- ARGV[8]     its name
-- ARGV[9]     '1' when it allows failures, else '0'
-- ARGV[10..12] its then, catch and finally links ('' for none)
-- ARGV[13]    'push': push the jobs, keep their chains and index the batch; 'park': keep
--             their chains and index the batch, but park the jobs' links in KEYS[12] instead of
--             pushing them, for a batch that is a link of a chain (the dispatch stays open
--             until the chain starts it); on a Redis Cluster, where the queues, the chains and
--             the index are in other slots, 'count' only counts the jobs and 'park-count' parks
--             them too, and the caller does the rest (KEYS[5..12] and each job's keys are then
--             keys of the batch, unused)
-- ARGV[14..]  for each job: how many uuids it adds (1, or its chain's links), those uuids, its
--             due time ('' ready), its link (lib/push_job.lua), how many links its
--             chain keeps after it, those
--             links, its chain's catch link ('' none)
-- Returns {1, callbacks owed...}: with ARGV[13] '0', the links of the callbacks that fell due,
-- for the caller to push; or {0} when 'add' found the batch finished, cancelled or gone:
-- nothing changed.
local at = effects_from(1, 1)
local batch = batch_from(at)
local batches = at.next_key()
local running = at.next_key()
local parked = at.next_key()
local mode, last, id = ARGV[5], ARGV[6], ARGV[7]
local how = ARGV[13]
local here = how == 'push' or how == 'park'
local parking = how == 'park' or how == 'park-count'
if how ~= 'push' then
  batch.owed = {}
  function batch.falls_due(name)
    local link = redis.call('hget', batch.callbacks, name)
    if link then table.insert(batch.owed, link) end
  end
end
if mode == 'create' then
  local now = now_millis()
  redis.call('hset', batch.record, 'name', ARGV[8], 'allow_failures', ARGV[9],
    'created_at', now, 'total', 0, 'open', 1)
  for i, name in ipairs({ 'then', 'catch', 'finally' }) do
    if ARGV[9 + i] ~= '' then
      redis.call('hset', batch.callbacks, name, ARGV[9 + i])
    end
  end
  if here then
    redis.call('zadd', batches, now, id)
    redis.call('zadd', running, now, id)
  end
elseif mode == 'add' then
  local state = redis.call('hmget', batch.record, 'created_at', 'cancelled_at', 'finished_at')
  if not state[1] or state[2] or state[3] then
    return { 0 }
  end
  redis.call('hincrby', batch.record, 'open', 1)
end
-- A part holds up to a thousand jobs, mostly ready ones of no group bound for one queue: they
-- are joined with one SADD, then pushed with one RPUSH (and one of their wake-up tokens),
-- not with four calls each.
local jobs, joining = {}, {}
at.arg = 14
while not at.done() do
  local job = { target = at.next_key(), notify = at.next_key(), list = at.next_key(),
    catch = at.next_key() }
  for _, uuid in ipairs(at.next_args(tonumber(at.next_arg()))) do
    table.insert(joining, uuid)
  end
  job.due, job.link = at.next_arg(), at.next_arg()
  job.links = at.next_args(tonumber(at.next_arg()))
  job.catch_link = at.next_arg()
  table.insert(jobs, job)
end
batch_join_all(batch, joining)
-- Ready jobs of no group that go to the same list one after another, not yet pushed.
local ready = { payloads = {} }
local function push_ready()
  if #ready.payloads == 0 then return end
  push_ready_jobs(ready.target, ready.notify, ready.payloads)
  ready.payloads = {}
end
for _, job in ipairs(jobs) do
  if here then
    if #job.links > 0 then
      redis.call('rpush', job.list, unpack(job.links))
    end
    if job.catch_link ~= '' then
      redis.call('set', job.catch, job.catch_link)
    end
  end
  if how == 'push' then
    local payload, group = link_parts(job.link)
    if job.due ~= '' or group then
      push_ready()
      push_job(job.target, job.notify, job.due, payload, group)
    else
      if job.target ~= ready.target or job.notify ~= ready.notify then
        push_ready()
        ready.target, ready.notify = job.target, job.notify
      end
      table.insert(ready.payloads, payload)
    end
  elseif parking then
    redis.call('rpush', parked, job.link)
  end
end
push_ready()
if last == '1' and not parking then
  redis.call('hincrby', batch.record, 'open', -1)
  batch_check(batch)
end
local reply = { 1 }
for _, link in ipairs(batch.owed or {}) do
  table.insert(reply, link)
end
return reply
