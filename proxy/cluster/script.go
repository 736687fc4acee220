package cluster

import "github.com/redis/go-redis/v9"

// leaseScript is the shared bucket, one token bucket per Redis key, run
// atomically by Redis, and its division among the proxies that share it.
// It reads Redis's own clock (TIME), so the proxies' clocks never matter.
//
//	KEYS[1]  the bucket's key: a hash {tokens, ts, r:<replica>...};
//	         absent means full
//	ARGV[1]  tokens per second, at least 1
//	ARGV[2]  size: the most tokens the bucket holds, at least 1
//	ARGV[3]  want: the tokens asked for, 0 or more
//	ARGV[4]  settle: tokens given back (> 0, unused) or owed (< 0,
//	         spent on credit); the level may go below 0 by what is owed,
//	         and refills from there
//	ARGV[5]  the calling replica's identity
//	ARGV[6]  its demand: the tokens a second its requests asked for
//	         lately, refused ones included
//
// Before Redis 5 a script that reads TIME and then writes must ask for
// effects replication, which the script does where the call exists.
//
// The bucket: it refills for the time since ts and settles. The division:
// each replica heard from in the last 3 s (field r:<replica> =
// "demand allowance seen") has a fair share of the rate, max-min fair over
// the replicas' demands (a replica asking less than an equal share of what
// is left gets what it asks, with 5% and 1 token a second of headroom; the
// others split the rest; what no one asks for is split equally). Its
// allowance fills at its share since it was last heard from, holds at most
// max(1, its share of size, 200 ms of its share), starts full, and takes
// what it settles. The others' allowances, filled to now, are reserved
// for them; the tokens beyond them are spare. The grant is min(want,
// floor(min(tokens, max(allowance, spare)))), never below 0, taken from
// the tokens and, down to 0, from the allowance: a replica gets its share
// whoever calls first, and tokens a replica leaves unused go to the
// others. A replica not heard from for 3 s is forgotten: its share goes
// to the others.
//
// It returns {granted, the level left, the tokens this replica could still
// be granted (its allowance or the spare, at most the level), the replicas heard
// from, its share in thousandths of a token a second}, each rounded down.
// The key expires once the bucket would be full again and no replica has
// been heard from for 3 s: an absent key is a full bucket, so idle points
// cost Redis no memory.
var leaseScript = redis.NewScript(`
if redis.replicate_commands then
  redis.replicate_commands() -- before Redis 5, TIME and then a write needs it; a no-op since
end
local rate = tonumber(ARGV[1])
local size = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local settle = tonumber(ARGV[4])
local me = 'r:' .. ARGV[5]
local demand = math.max(0, tonumber(ARGV[6]) or 0)
local forget = 3000000 -- µs without a call after which a replica is forgotten
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local tokens, ts
-- The replicas heard from lately, this one last: demand, allowance, seen.
local ds, as, ss = {}, {}, {}
local h = redis.call('HGETALL', KEYS[1])
local myAllowance, mySeen
for i = 1, #h, 2 do
  local f, v = h[i], h[i + 1]
  if f == 'tokens' then
    tokens = tonumber(v)
  elseif f == 'ts' then
    ts = tonumber(v)
  elseif string.sub(f, 1, 2) == 'r:' then
    local d, a, s = string.match(v, '^(%S+) (%S+) (%S+)$')
    d, a, s = tonumber(d), tonumber(a), tonumber(s)
    if d == nil or a == nil or s == nil or now - s > forget then
      redis.call('HDEL', KEYS[1], f)
    elseif f == me then
      myAllowance, mySeen = a, s
    else
      ds[#ds + 1], as[#as + 1], ss[#ss + 1] = d, a, s
    end
  end
end
local n = #ds + 1
ds[n] = demand
if tokens == nil or ts == nil then
  tokens = size
  ts = now
end
if now > ts then
  tokens = math.min(size, tokens + (now - ts) * rate / 1000000)
end
tokens = math.min(size, tokens + settle)

-- Max-min fair shares: fill the smallest demands first.
local order = {}
for i = 1, n do order[i] = i end
table.sort(order, function(x, y) return ds[x] < ds[y] end)
local left = rate
local shares = {}
for k, i in ipairs(order) do
  shares[i] = math.min(ds[i] * 1.05 + 1, left / (n - k + 1))
  left = left - shares[i]
end
local function capOf(share) return math.max(1, size * share / rate, share * 0.2) end

-- The others' allowances as they stand now are reserved for them; the
-- tokens beyond are spare, and any replica may be granted them.
local reserved = 0
for i = 1, n - 1 do
  local share = shares[i] + left / n
  reserved = reserved + math.max(0, math.min(capOf(share), as[i] + share * math.max(0, now - ss[i]) / 1000000))
end
local share = shares[n] + left / n
local cap = capOf(share)
local allowance = myAllowance
if allowance == nil then
  allowance = cap
elseif now > mySeen then
  allowance = allowance + share * (now - mySeen) / 1000000
end
allowance = math.min(cap, allowance + settle)

local avail = math.min(tokens, math.max(allowance, tokens - reserved))
local granted = 0
if avail >= 1 and want > 0 then
  granted = math.min(want, math.floor(avail))
end
tokens = tokens - granted
allowance = allowance - math.min(granted, math.max(0, allowance))
redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', tokens), 'ts', string.format('%.0f', now),
  me, string.format('%.3f %.6f %.0f', demand, allowance, now))
redis.call('PEXPIRE', KEYS[1], math.max(math.ceil((size - tokens) * 1000 / rate), forget / 1000) + 1000)
return {granted, math.floor(tokens), math.floor(math.min(tokens, math.max(allowance, tokens - reserved))), n, math.floor(share * 1000)}
`)
