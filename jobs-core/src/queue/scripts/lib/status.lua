-- A job's status and events: the record a tracked job keeps (jobs:status:<uuid>), the events
-- stream of a queue whose events are on (queues:<name>:events), and the signals a settling
-- job gives waiting dispatchers (jobs:settled). Shared by the scripts that settle a job
-- (complete.lua, release.lua, fail.lua), by progress.lua and by cancel.lua.

-- The states after which a job does not run again.
local function status_is_final(state)
  return state == 'done' or state == 'failed' or state == 'cancelled'
end

-- Appends an event to a queue's events stream, kept at about `maxlen` entries.
local function status_event(stream, maxlen, event, uuid, job, attempt, data)
  redis.call('xadd', stream, 'maxlen', '~', maxlen, '*',
    'event', event, 'uuid', uuid, 'job', job, 'attempt', attempt, 'data', data)
end

-- Appends one event of many jobs as one entry, as the calls that move jobs in numbers write
-- them (a push, a pop, an acknowledgement): `n` jobs, their uuids and attempts joined by
-- spaces, their job names by newlines. Readers give each job its own event.
local function status_events(stream, maxlen, event, uuids, jobs, attempts)
  if #uuids == 0 then return end
  redis.call('xadd', stream, 'maxlen', '~', maxlen, '*', 'event', event, 'n', #uuids,
    'uuid', table.concat(uuids, ' '), 'job', table.concat(jobs, '\n'),
    'attempt', table.concat(attempts, ' '))
end

-- The status effect of a settling job (lib/effects.lua).
--   keys: jobs:status:<uuid>, jobs:cancel, jobs:settled, queues:<name>:events, and
--         jobs:batch:<id>:results (the record's key again for a job of no batch)
--   args: uuid, state (done, failed, cancelled, released), attempt, queue, job, the last
--         progress ('' for none), the field to set with the outcome ('result', 'error' or
--         ''), its value, how long to keep the record in ms ('0': the job is not tracked,
--         and keeps none), the events stream's length ('0': events are off), the event
--         (completed, failed, cancelled, released), '1' to keep the result in its batch's
--         results too (a tracked job of a batch), else ''
local function status_settled(at)
  local record, cancels, settled, stream = at.next_key(), at.next_key(), at.next_key(), at.next_key()
  local batch_results = at.next_key()
  local uuid, state, attempt, queue, job = at.next_arg(), at.next_arg(), at.next_arg(), at.next_arg(), at.next_arg()
  local progress, field, value = at.next_arg(), at.next_arg(), at.next_arg()
  local keep_ms, maxlen, event, in_batch = at.next_arg(), at.next_arg(), at.next_arg(), at.next_arg()
  local final = status_is_final(state)
  -- A progress the job reported that progress.lua has not written yet never will (the attempt
  -- no longer runs): its event is appended here, before the outcome's. One it wrote is the
  -- record's progress already, and is not repeated.
  local unwritten_progress = keep_ms ~= '0' and maxlen ~= '0' and progress ~= ''
    and redis.call('hget', record, 'progress') ~= progress
  if keep_ms ~= '0' then
    redis.call('hset', record, 'state', state, 'attempt', attempt, 'queue', queue, 'job', job,
      'updated_ms', now_millis())
    if progress ~= '' then redis.call('hset', record, 'progress', progress) end
    if field ~= '' then redis.call('hset', record, field, value) end
    redis.call('pexpire', record, keep_ms)
    if in_batch == '1' and field == 'result' then
      redis.call('hset', batch_results, uuid, value)
      redis.call('pexpire', batch_results, keep_ms)
    end
    if final then
      redis.call('xadd', settled, 'maxlen', '~', 10000, '*', 'uuid', uuid, 'state', state)
    end
  end
  if final then redis.call('zrem', cancels, uuid) end
  if maxlen ~= '0' then
    if unwritten_progress then
      status_event(stream, maxlen, 'progress', uuid, job, attempt, progress)
    end
    local data = value
    if field == '' then data = '' end
    status_event(stream, maxlen, event, uuid, job, attempt, data)
  end
end
