-- Redis's clock, which every script goes by, in the three precisions the keys use. Prepended
-- to the scripts that read the time (see scripts.rs), so each precision has one definition.

-- Seconds with millisecond precision: scores of :delayed and :reserved.
local function now_seconds()
  local time = redis.call('time')
  return tonumber(time[1]) + math.floor(tonumber(time[2]) / 1000) / 1000
end

-- Both of the above from one reading: seconds with millisecond precision, which the scores are
-- written in and compared with, and with microsecond precision, which says how long until a
-- score is reached (pop.lua's next due time).
local function now_seconds_and_precise()
  local time = redis.call('time')
  local seconds, micros = tonumber(time[1]), tonumber(time[2])
  return seconds + math.floor(micros / 1000) / 1000, seconds + micros / 1000000
end

-- Seconds with microsecond precision: scores of the failed-job index, so that failures within
-- one second keep their order.
local function now_seconds_precise()
  local time = redis.call('time')
  return tonumber(time[1]) + tonumber(time[2]) / 1000000
end

-- Whole milliseconds since the epoch.
local function now_millis()
  local time = redis.call('time')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
