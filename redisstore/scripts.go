package redisstore

import "github.com/redis/go-redis/v9"

// The state changes of a record, one Lua script each. A script runs atomically on the
// server and touches only KEYS[1], the record's own hash, so a cluster routes it to the
// key's slot and never needs a cross-slot script. Time comes from the caller (ARGV), never
// from the server's clock: the same instant decides the claim as in the other stores, and a
// test's fake clock drives it. Expiry and lease ends are epoch milliseconds.
//
// Scripts run with redis.Script, which sends EVALSHA and falls back to EVAL (which also
// caches the script) when the server answers NOSCRIPT.

// claimScript claims KEYS[1] at now ARGV[1] for a record carrying checkpoint ARGV[2],
// number ARGV[5] and fingerprint ARGV[6], expiring at ARGV[3] (0: never), with the fields
// ARGV[7...] (name, value pairs). The stored record refuses the claim while it holds the
// key: it exists, its expiration (if any) has not passed, and it is not an in-progress
// record whose lease end has passed and whose checkpoint is ARGV[2] (an empty checkpoint
// and none are alike), with, if it has one, number ARGV[5] (none counts as 0) and
// fingerprint ARGV[6] (none counts as empty). It refuses it too,
// if not expired, when its token is ARGV[4], the released token of the claim's own: the
// tombstone of the claim's owner's release, met by a late attempt of the claim. It returns
// {1, old fields} when claimed (no fields for an absent record), else {0, fields of the
// record that refused}: a refused claim carries the record in the same round trip.
var claimScript = redis.NewScript(`
local cur = redis.call('HGETALL', KEYS[1])
if #cur > 0 then
  local r = {}
  for i = 1, #cur, 2 do r[cur[i]] = cur[i + 1] end
  local now = tonumber(ARGV[1])
  local exp = tonumber(r['expiration'])
  if exp == nil or now < exp then
    local lease = tonumber(r['in_progress_expiration'])
    local ended = r['status'] == 'INPROGRESS' and lease ~= nil and now >= lease
    if not ended or r['lease_token'] == ARGV[4] then
      return {0, cur}
    end
    local cp = r['checkpoint'] or ''
    if cp ~= ARGV[2] then
      return {0, cur}
    end
    if cp ~= '' and ((r['checkpoint_seq'] or '0') ~= ARGV[5] or (r['validation'] or '') ~= ARGV[6]) then
      return {0, cur}
    end
  end
  redis.call('DEL', KEYS[1])
end
redis.call('HSET', KEYS[1], unpack(ARGV, 7))
if ARGV[2] ~= '' then
  redis.call('HSET', KEYS[1], 'checkpoint', ARGV[2])
end
if ARGV[3] ~= '0' then
  redis.call('PEXPIREAT', KEYS[1], ARGV[3])
end
return {1, cur}
`)

// completeScript replaces the in-progress record KEYS[1] owned by token ARGV[1] with the
// fields ARGV[3...], keeping its checkpoint and the checkpoint's number and expiring at
// ARGV[2] (0: never). It returns
// 1 when it completed the record, or found it completed already under ARGV[1] (a resend of
// a completion whose answer was lost: nothing is written twice), and 0 when ARGV[1] does
// not own it (lease lost).
var completeScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'lease_token', 'status', 'checkpoint', 'checkpoint_seq')
if cur[1] ~= ARGV[1] then return 0 end
if cur[2] ~= 'INPROGRESS' then return 1 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
if cur[3] then
  redis.call('HSET', KEYS[1], 'checkpoint', cur[3])
end
if cur[4] then
  redis.call('HSET', KEYS[1], 'checkpoint_seq', cur[4])
else
  redis.call('HDEL', KEYS[1], 'checkpoint_seq')
end
if ARGV[2] ~= '0' then
  redis.call('PEXPIREAT', KEYS[1], ARGV[2])
end
return 1
`)

// releaseScript gives up the lease of token ARGV[1] on the in-progress record KEYS[1],
// keeping it as a tombstone (it keeps its expiry): its lease end is set to ARGV[3] (the
// release's now) and its token to ARGV[2] (the released token), so a claim made from then
// on takes it over (with its checkpoint, if any), no late write of the releasing owner
// lands, and a claim sent before the release and delivered after it is refused. It returns 1, or 0
// when ARGV[1] does not own an in-progress record (lease lost).
var releaseScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'lease_token', 'status')
if cur[1] ~= ARGV[1] or cur[2] ~= 'INPROGRESS' then return 0 end
redis.call('HSET', KEYS[1], 'in_progress_expiration', ARGV[3], 'lease_token', ARGV[2])
return 1
`)

// extendScript moves the lease end of the in-progress record KEYS[1] owned by token
// ARGV[1] to ARGV[2], never earlier than it is: an extension delayed in the network behind
// a later one cannot shorten the lease. It returns 1, or 0 when ARGV[1] does not own an
// in-progress record (lease lost).
var extendScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'lease_token', 'status', 'in_progress_expiration')
if cur[1] ~= ARGV[1] or cur[2] ~= 'INPROGRESS' then return 0 end
local old = tonumber(cur[3])
if old == nil or tonumber(ARGV[2]) > old then
  redis.call('HSET', KEYS[1], 'in_progress_expiration', ARGV[2])
end
return 1
`)

// checkpointScript sets the checkpoint of the in-progress record KEYS[1] owned by token
// ARGV[1] to ARGV[2], numbered ARGV[3], if the stored number (absent: 0) is below it. It
// returns 1, also when the record holds ARGV[2] at ARGV[3] already (a resend), or 0 when
// ARGV[1] does not own an in-progress record (lease lost) or holds a checkpoint numbered
// as high or higher (a late write, which must not replace a later checkpoint).
var checkpointScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'lease_token', 'status', 'checkpoint_seq', 'checkpoint')
if cur[1] ~= ARGV[1] or cur[2] ~= 'INPROGRESS' then return 0 end
local stored, seq = tonumber(cur[3]) or 0, tonumber(ARGV[3])
if stored == seq and (cur[4] or '') == ARGV[2] then return 1 end
if stored >= seq then return 0 end
redis.call('HSET', KEYS[1], 'checkpoint', ARGV[2], 'checkpoint_seq', ARGV[3])
return 1
`)
