-- Batches. A batch's record is the hash jobs:batch:<id> (name, allow_failures, created_at, and
-- the counters total and open), with the set of its jobs still pending, the sorted set of its
-- failed jobs and the hash of its callback links (then, catch, finally). How many jobs are
-- pending and how many failed are the sizes of the two sets, read from them when asked: no
-- copy in the record can fall behind them.
-- Every count keys on a job's uuid (SREM, ZADD NX), so a job that runs twice counts once, and
-- each callback is pushed once, guarded by the time it was pushed (HSETNX then_at, ...).
-- `open` counts the dispatches adding jobs still under way: the batch cannot finish before
-- they are done.

-- The batch's keys and its callbacks' routes, read from the effects' reader (lib/effects.lua):
-- a callback that falls due is pushed at once.
--   keys: the record, the pending set, the failed set, the callbacks hash, then for then,
--         catch and finally in turn the callback's ready list (or delayed set) and notify
--   args: the due time of then, catch and finally ('' ready), how long to keep the batch once
--         it is finished, in seconds
local function batch_from(at)
  local batch = {
    record = at.next_key(), pending = at.next_key(), failed = at.next_key(),
    callbacks = at.next_key(), targets = {},
  }
  for _, name in ipairs({ 'then', 'catch', 'finally' }) do
    batch.targets[name] = { target = at.next_key(), notify = at.next_key() }
  end
  for _, name in ipairs({ 'then', 'catch', 'finally' }) do
    batch.targets[name].due = at.next_arg()
  end
  batch.keep = tonumber(at.next_arg())
  function batch.falls_due(name)
    local link = redis.call('hget', batch.callbacks, name)
    if link then
      local route = batch.targets[name]
      push_link(route.target, route.notify, route.due, link)
    end
  end
  return batch
end

-- The batch's keys alone, for a Redis Cluster, where its callbacks' queues are in other slots:
-- a callback that falls due is added to `batch.owed`, for the caller to push.
--   keys: the record, the pending set, the failed set, the callbacks hash
--   args: how long to keep the batch once it is finished, in seconds
local function batch_owing_from(at)
  local batch = {
    record = at.next_key(), pending = at.next_key(), failed = at.next_key(),
    callbacks = at.next_key(), owed = {},
  }
  batch.keep = tonumber(at.next_arg())
  function batch.falls_due(name)
    local link = redis.call('hget', batch.callbacks, name)
    if link then
      table.insert(batch.owed, link)
    end
  end
  return batch
end

-- Adds the jobs `uuids` to the batch, each once.
local function batch_join_all(batch, uuids)
  local added = 0
  for i = 1, #uuids, 1000 do
    added = added + redis.call('sadd', batch.pending, unpack(uuids, i, math.min(i + 999, #uuids)))
  end
  if added > 0 then
    redis.call('hincrby', batch.record, 'total', added)
  end
end

-- Adds the jobs `jobs` (each with its uuid) and the jobs `uuids` to the batch, each once:
-- the jobs a handler added, to push and only to count.
local function batch_join_added(batch, jobs, uuids)
  local joining = {}
  for _, job in ipairs(jobs) do table.insert(joining, job.uuid) end
  for _, uuid in ipairs(uuids) do table.insert(joining, uuid) end
  batch_join_all(batch, joining)
end

-- Takes the job `uuid` out of the batch without counting it as run (a link after a failed one
-- in a chain of the batch, which will not run).
local function batch_leave(batch, uuid)
  if redis.call('srem', batch.pending, uuid) == 1 then
    redis.call('hincrby', batch.record, 'total', -1)
  end
end

-- Once no job is pending and no dispatch is adding jobs: marks the batch finished, lets `then`
-- fall due if none failed and it was not cancelled, and `finally`, each once, and lets the
-- batch's keys expire.
local function batch_check(batch)
  local state = redis.call('hmget', batch.record, 'total', 'open', 'cancelled_at', 'finished_at')
  if not state[1] then
    return
  end
  if redis.call('scard', batch.pending) > 0 or tonumber(state[2] or '0') > 0 then
    return
  end
  if not state[4] then
    redis.call('hset', batch.record, 'finished_at', now_millis())
  end
  if redis.call('zcard', batch.failed) == 0 and not state[3]
      and redis.call('hsetnx', batch.record, 'then_at', now_millis()) == 1 then
    batch.falls_due('then')
  end
  if redis.call('hsetnx', batch.record, 'finally_at', now_millis()) == 1 then
    batch.falls_due('finally')
  end
  for _, key in ipairs({ batch.record, batch.pending, batch.failed, batch.callbacks }) do
    redis.call('expire', key, batch.keep)
  end
end

-- Counts the job `uuid` of the batch done, once: it leaves the pending set, or the failed set
-- for a failed job retried by hand that succeeded (a job is in at most one of the two). The
-- acker counts many jobs the same way with native `SREM` and `ZREM` (complete_batch.lua).
local function batch_count_done(batch, uuid)
  if redis.call('srem', batch.pending, uuid) == 0 then
    redis.call('zrem', batch.failed, uuid)
  end
end

-- Jobs added to the batch: those to push, and those only to count (the links of its chains,
-- which their chains push), read from the effects' reader.
--   keys: for each job pushed, its ready list (or delayed set) and notify
--   args: how many pushed, then for each its uuid, due time and link; how many only counted,
--         then their uuids
local function batch_additions_from(at)
  local pushed = {}
  for i = 1, tonumber(at.next_arg()) do
    pushed[i] = {
      target = at.next_key(), notify = at.next_key(),
      uuid = at.next_arg(), due = at.next_arg(), link = at.next_arg(),
    }
  end
  return { pushed = pushed, counted = at.next_args(tonumber(at.next_arg())) }
end

-- Adds jobs to the batch, each once, pushing those to push.
local function batch_add(batch, additions)
  batch_join_added(batch, additions.pushed, additions.counted)
  for _, job in ipairs(additions.pushed) do
    push_link(job.target, job.notify, job.due, job.link)
  end
end

-- A job of the batch is done: counts it (a failed job retried by hand that succeeds now
-- leaves the failed set), after adding the jobs its handler added. A batch whose record is
-- gone (pruned) counts nothing.
--   keys and args: batch_from's, the job's uuid, then batch_additions_from's
local function batch_done(at)
  local batch = batch_from(at)
  local uuid = at.next_arg()
  local additions = batch_additions_from(at)
  if redis.call('exists', batch.record) == 0 then
    return
  end
  batch_add(batch, additions)
  batch_count_done(batch, uuid)
  batch_check(batch)
end

-- Counts the job `uuid` of the batch failed, once; the first failure lets `catch` fall due
-- and, unless the batch allows failures, cancels it. The links of its chain that will not run
-- now (`leaving`) leave the batch.
local function batch_count_failed(batch, uuid, leaving)
  if redis.call('exists', batch.record) == 0 then
    return
  end
  if redis.call('srem', batch.pending, uuid) == 1 then
    redis.call('zadd', batch.failed, now_seconds_precise(), uuid)
    if redis.call('hsetnx', batch.record, 'catch_at', now_millis()) == 1 then
      batch.falls_due('catch')
    end
    if redis.call('hget', batch.record, 'allow_failures') ~= '1' then
      redis.call('hsetnx', batch.record, 'cancelled_at', now_millis())
    end
  end
  for _, link in ipairs(leaving) do
    batch_leave(batch, link)
  end
  batch_check(batch)
end

-- A job of the batch failed for good (batch_count_failed).
--   keys and args: batch_from's, the job's uuid, how many links leave, their uuids
local function batch_failed(at)
  local batch = batch_from(at)
  local uuid = at.next_arg()
  local leaving = at.next_args(tonumber(at.next_arg()))
  batch_count_failed(batch, uuid, leaving)
end

-- Takes the parked jobs of a batch its chain reached out of the list `parked`, and closes the
-- dispatch that parked them (an empty batch finishes then); returns their links, in order.
local function batch_unpark(batch, parked)
  local links = redis.call('lrange', parked, 0, -1)
  redis.call('del', parked)
  if redis.call('exists', batch.record) == 1 then
    redis.call('hincrby', batch.record, 'open', -1)
    batch_check(batch)
  end
  return links
end

-- A batch that is a link of a chain starts: the chain reached it. Its jobs, counted when the
-- chain was dispatched and parked since, are pushed (batch_unpark).
--   keys: batch_from's, the parked list (jobs:batch:<id>:parked), then for each parked job its
--         ready list (or delayed set) and notify
--   args: batch_from's, how many jobs are parked, then each one's due time ('' ready)
local function batch_start(at)
  local batch = batch_from(at)
  local parked = at.next_key()
  local routes = {}
  for i = 1, tonumber(at.next_arg()) do
    routes[i] = { target = at.next_key(), notify = at.next_key(), due = at.next_arg() }
  end
  for i, link in ipairs(batch_unpark(batch, parked)) do
    local route = routes[i]
    if route then
      push_link(route.target, route.notify, route.due, link)
    end
  end
end
