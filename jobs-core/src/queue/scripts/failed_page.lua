-- failed_page: one bounded step of a listing or search of the failed-job store, newest first.
-- It reads at most ARGV[6] records, and stops early once ARGV[5] match or it has run for
-- ARGV[7] milliseconds, so no call holds Redis long however large the store; the caller goes
-- on from where it stopped.
-- KEYS[1]  failed_jobs            hash: uuid -> failed-job record (JSON)
-- KEYS[2]  failed_jobs:index      set: uuid, score = failed_at (seconds)
-- ARGV[1]  the cursor's score: go on after the entry (ARGV[1], ARGV[2]) in newest-first
--          order; '' to start from the newest (or from ARGV[4])
-- ARGV[2]  the cursor's uuid ('' with ARGV[1] = '')
-- ARGV[3]  the oldest score to list ('-inf': no bound)
-- ARGV[4]  the newest score to list ('+inf': no bound)
-- ARGV[5]  how many matches to return at most
-- ARGV[6]  how many records to read at most
-- ARGV[7]  how long to run at most, in milliseconds
-- ARGV[8]  only this queue ('' any)
-- ARGV[9]  only this job: the payload's job or displayName ('' any)
-- ARGV[10] only jobs with this tag ('' any)
-- ARGV[11] only records whose exception, payload or uuid contains this text, in lower case
--          ('' any)
-- Returns {store size, records read, last score read, last uuid read, done (1: nothing older is
-- left), rank, uuid, record, rank, uuid, record, ...}: each match with its 0-based rank in
-- newest-first order. The last entry read is the cursor to go on from.
local index, hash = KEYS[2], KEYS[1]
local size = redis.call('zcard', index)
local start
if ARGV[1] ~= '' then
  start = redis.call('zcount', index, '(' .. ARGV[1], '+inf')
  -- Entries of the cursor's score come in reverse order of their uuids: those at or above
  -- the cursor's were read.
  for _, uuid in ipairs(redis.call('zrange', index, ARGV[1], ARGV[1], 'byscore')) do
    if uuid >= ARGV[2] then
      start = start + 1
    end
  end
elseif ARGV[4] ~= '+inf' then
  start = redis.call('zcount', index, '(' .. ARGV[4], '+inf')
else
  start = 0
end

local oldest = tonumber(ARGV[3])
local wanted, budget = tonumber(ARGV[5]), tonumber(ARGV[6])
local queue, job, tag, text = ARGV[8], ARGV[9], ARGV[10], ARGV[11]
local deadline = now_millis() + tonumber(ARGV[7])

local function matches(raw)
  if queue == '' and job == '' and tag == '' and text == '' then
    return true
  end
  local ok, record = pcall(cjson.decode, raw)
  if not ok or type(record) ~= 'table' then
    -- An unreadable record is listed as its text; only a text search can find it.
    return queue == '' and job == '' and tag == '' and string.find(string.lower(raw), text, 1, true) ~= nil
  end
  if queue ~= '' and record.queue ~= queue then
    return false
  end
  if text ~= '' then
    local found = false
    for _, field in ipairs({record.exception, record.payload, record.uuid}) do
      if type(field) == 'string' and string.find(string.lower(field), text, 1, true) then
        found = true
        break
      end
    end
    if not found then
      return false
    end
  end
  if job == '' and tag == '' then
    return true
  end
  local decoded, payload = false, nil
  if type(record.payload) == 'string' then
    decoded, payload = pcall(cjson.decode, record.payload)
  end
  if not decoded or type(payload) ~= 'table' then
    return false
  end
  if job ~= '' and payload.job ~= job and payload.displayName ~= job then
    return false
  end
  if tag ~= '' then
    if type(payload.tags) ~= 'table' then
      return false
    end
    for _, t in ipairs(payload.tags) do
      if t == tag then
        return true
      end
    end
    return false
  end
  return true
end

local reply = {size, 0, '', '', 0}
local read, found, rank, done = 0, 0, start, false
local step = 50
while found < wanted and read < budget do
  local batch = redis.call('zrange', index, rank, rank + math.min(step, budget - read) - 1, 'rev', 'withscores')
  if #batch == 0 then
    done = true
    break
  end
  for i = 1, #batch, 2 do
    local uuid, score = batch[i], batch[i + 1]
    if tonumber(score) < oldest then
      done = true
      break
    end
    read = read + 1
    reply[3], reply[4] = score, uuid
    local raw = redis.call('hget', hash, uuid)
    if raw and matches(raw) then
      found = found + 1
      table.insert(reply, rank)
      table.insert(reply, uuid)
      table.insert(reply, raw)
    end
    rank = rank + 1
    if found >= wanted then
      break
    end
  end
  if done or now_millis() >= deadline then
    break
  end
end
if not done and rank >= size then
  done = true
end
reply[2] = read
reply[5] = done and 1 or 0
return reply
