-- extend: push back the expiry of reservations a live worker still holds.
-- KEYS[1]  queues:<name>:reserved
-- ARGV[1]  retry_after in seconds (may have a fraction): the new expiry is server time + this
-- ARGV[2..] reserved copies, byte for byte as pop returned them
-- Returns how many were still held and were extended. A reservation that is gone (expired and
-- migrated, or settled meanwhile) is left alone.
local now = now_seconds()
local expires = now + tonumber(ARGV[1])
local extended = 0
for i = 2, #ARGV do
  if redis.call('zscore', KEYS[1], ARGV[i]) then
    redis.call('zadd', KEYS[1], 'XX', expires, ARGV[i])
    extended = extended + 1
  end
end
return extended
