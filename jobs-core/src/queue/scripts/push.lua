-- push: append ready jobs to a queue, one wake-up token per job.
-- KEYS[1]  queues:<name>          ready list
-- KEYS[2]  queues:<name>:notify   wake-up tokens
-- ARGV     one or more payloads, in order
-- Returns the ready list's length after the push.
local len = 0
for i = 1, #ARGV, 1000 do
  local last = math.min(i + 999, #ARGV)
  len = redis.call('rpush', KEYS[1], unpack(ARGV, i, last))
  local tokens = {}
  for j = 1, last - i + 1 do tokens[j] = '1' end
  redis.call('rpush', KEYS[2], unpack(tokens))
end
return len
