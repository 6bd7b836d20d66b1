-- Fields of a payload read without decoding it, which a script must never do (an error would
-- leave its earlier writes in place): the top-level attempts number, found near the end, the
-- uuid, the payload's first field, and the job name. Read by pop.lua, which raises the
-- attempts, and names the jobs it reserves in their `active` events.

-- The position of the top-level attempts number: the last "attempts" key followed by a
-- colon and digits. It sits near the end of a payload, so the tail is searched first. Keys are
-- found by a plain search and only they are matched against the pattern: a pattern search
-- tries every position of the payload.
local AFTER_KEY = '^%s*:%s*()%d+()'
local function attempts_at(job, from)
  local first, last
  local init = from
  while true do
    local _, key_end = string.find(job, '"attempts"', init, true)
    if not key_end then break end
    local digits_from, digits_to = string.match(job, AFTER_KEY, key_end + 1)
    if digits_from then
      first, last, init = digits_from, digits_to, digits_to
    else
      init = key_end + 1
    end
  end
  if first == nil and from > 1 then return attempts_at(job, 1) end
  return first, last
end


-- The payload's uuid: its first field, as this project and Laravel write it ('' otherwise).
-- Plain searches, no pattern: these run for every job of a queue whose events are on.
local function payload_uuid(job)
  if string.sub(job, 1, 9) ~= '{"uuid":"' then return '' end
  local close = string.find(job, '"', 10, true)
  if not close then return '' end
  return string.sub(job, 10, close - 1)
end

-- The payload's job name: the first "job" field, which comes before the job's data.
local function payload_job(job)
  local _, key_end = string.find(job, '"job":"', 1, true)
  if not key_end then return '' end
  local close = string.find(job, '"', key_end + 1, true)
  if not close then return '' end
  return string.sub(job, key_end + 1, close - 1)
end
