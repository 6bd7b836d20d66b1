-- Redis's clock, which every script goes by, in the three precisions the keys use. Prepended
-- to the scripts that read the time (see scripts.rs), so each precision has one definition.

-- One reading of the clock in two precisions: seconds with millisecond precision, which the
-- scores of :delayed and :reserved are written in and compared with, and seconds with
-- microsecond precision, the scores of the failed-job index (failures within one second keep
-- their order) and what pop.lua measures the time until a score is reached from.
local function now_seconds_and_precise()
  local time = redis.call('time')
  local seconds, micros = tonumber(time[1]), tonumber(time[2])
  return seconds + math.floor(micros / 1000) / 1000, seconds + micros / 1000000
end

-- Seconds with millisecond precision.
local function now_seconds()
  return (now_seconds_and_precise())
end

-- Seconds with microsecond precision.
local function now_seconds_precise()
  local _, precise = now_seconds_and_precise()
  return precise
end

-- Whole milliseconds since the epoch.
local function now_millis()
  local time = redis.call('time')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
