-- pop: migrate due jobs, then reserve up to ARGV[2] ready jobs.
-- KEYS[1]  queues:<name>            ready list
-- KEYS[2]  queues:<name>:delayed    delayed set
-- KEYS[3]  queues:<name>:reserved   reserved set, score = reservation expiry
-- KEYS[4]  queues:<name>:notify     wake-up tokens
-- ARGV[1]  retry_after in seconds (may have a fraction)
-- ARGV[2]  how many jobs to reserve at most
-- ARGV[3]  how many jobs to migrate at most from each of :delayed and :reserved
-- KEYS[5]  queues:<name>:events     the queue's events stream
-- ARGV[4]  its length, when the queue's events are on ('0': off): the reserved jobs then
--          append their `active` events, as one entry
-- Returns { {reserved copy, ...}, microseconds until the next delayed job or reservation is due
--           (-1: none) }
--
-- Migration moves due delayed jobs, then expired reservations, to the tail of the ready list
-- in due order (expired ones keep their incremented attempts), in bounded chunks so that any
-- backlog migrates without one long script. A reserved copy is the popped payload with its
-- top-level "attempts" (the last "attempts" key with a number; only "delay" follows it)
-- raised by one; the payload's other bytes are kept as they are. A payload without that
-- field is reserved unchanged, for the worker to report as malformed. Finally the notify
-- list is set to one token per ready job.
local now = now_seconds()
local migrate_limit = tonumber(ARGV[3])

local function migrate(from)
  local due = redis.call('zrangebyscore', from, '-inf', now, 'limit', 0, migrate_limit)
  if #due > 0 then
    redis.call('zremrangebyrank', from, 0, #due - 1)
    for i = 1, #due, 1000 do
      redis.call('rpush', KEYS[1], unpack(due, i, math.min(i + 999, #due)))
    end
  end
end
migrate(KEYS[2])
migrate(KEYS[3])

local reserved = {}
local events = { uuids = {}, jobs = {}, attempts = {} }
local popped = redis.call('lpop', KEYS[1], tonumber(ARGV[2]))
if popped then
  -- redis.call formats a number argument each time it is given, and Lua formats a number
  -- each time it is joined to a string; the texts are made once per call instead ('%.17g'
  -- keeps every bit of the score).
  local expires = string.format('%.17g', now + tonumber(ARGV[1]))
  local raised = {}
  local scored = {}
  local with_events = ARGV[4] ~= '0'
  for i, job in ipairs(popped) do
    local first, last = attempts_at(job, math.max(1, #job - 64))
    local next_attempts = '0'
    if first then
      local attempts = string.sub(job, first, last - 1)
      next_attempts = raised[attempts]
      if not next_attempts then
        next_attempts = tostring(tonumber(attempts) + 1)
        raised[attempts] = next_attempts
      end
      job = string.sub(job, 1, first - 1) .. next_attempts .. string.sub(job, last)
    end
    reserved[i] = job
    if with_events then
      events.uuids[i] = payload_uuid(job)
      events.jobs[i] = payload_job(job)
      events.attempts[i] = next_attempts
    end
    scored[2 * i - 1] = expires
    scored[2 * i] = job
  end
  for i = 1, #scored, 2000 do
    redis.call('zadd', KEYS[3], unpack(scored, i, math.min(i + 1999, #scored)))
  end
  if with_events then
    status_events(KEYS[5], ARGV[4], 'active', events.uuids, events.jobs, events.attempts)
  end
end

local ready = redis.call('llen', KEYS[1])
local tokens = redis.call('llen', KEYS[4])
if tokens > ready then
  if ready == 0 then
    redis.call('del', KEYS[4])
  else
    redis.call('ltrim', KEYS[4], 0, ready - 1)
  end
elseif tokens < ready then
  local ones = {}
  for i = 1, math.min(ready - tokens, 1000) do ones[i] = '1' end
  local missing = ready - tokens
  while missing > 0 do
    local n = math.min(missing, #ones)
    redis.call('rpush', KEYS[4], unpack(ones, 1, n))
    missing = missing - n
  end
end

local next_due = -1
for _, key in ipairs({ KEYS[2], KEYS[3] }) do
  local first = redis.call('zrange', key, 0, 0, 'withscores')[2]
  if first then
    local us = math.max(0, math.ceil((tonumber(first) - now) * 1000000))
    if next_due < 0 or us < next_due then next_due = us end
  end
end
return { reserved, next_due }
