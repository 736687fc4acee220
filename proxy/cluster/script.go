package cluster

import "github.com/redis/go-redis/v9"

// leaseScript is the shared bucket, one token bucket per Redis key, run
// atomically by Redis. It reads Redis's own clock (TIME), so the proxies'
// clocks never matter.
//
//	KEYS[1]  the bucket's key: a hash {tokens, ts}; absent means full
//	ARGV[1]  tokens per second, at least 1
//	ARGV[2]  size: the most tokens the bucket holds, at least 1
//	ARGV[3]  want: the tokens asked for, 0 or more
//	ARGV[4]  settle: tokens given back (> 0, unused) or owed (< 0,
//	         spent on credit); the level may go below 0 by what is owed,
//	         and refills from there
//
// Before Redis 5 a script that reads TIME and then writes must ask for
// effects replication, which the script does where the call exists.
//
// It refills the bucket for the time since ts, settles, grants
// min(want, floor(tokens)) (never below 0), and returns {granted, the level
// left rounded down}. The key expires once the bucket would be full again:
// an absent key is a full bucket, so idle points cost Redis no memory.
var leaseScript = redis.NewScript(`
if redis.replicate_commands then
  redis.replicate_commands() -- before Redis 5, TIME and then a write needs it; a no-op since
end
local rate = tonumber(ARGV[1])
local size = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local settle = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1])
local ts = tonumber(b[2])
if tokens == nil or ts == nil then
  tokens = size
  ts = now
end
if now > ts then
  tokens = math.min(size, tokens + (now - ts) * rate / 1000000)
end
tokens = math.min(size, tokens + settle)
local granted = 0
if tokens >= 1 and want > 0 then
  granted = math.min(want, math.floor(tokens))
end
tokens = tokens - granted
redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', tokens), 'ts', string.format('%.0f', now))
redis.call('PEXPIRE', KEYS[1], math.ceil((size - tokens) * 1000 / rate) + 1000)
return {granted, math.floor(tokens)}
`)
