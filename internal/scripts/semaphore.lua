-- semaphore.lua is not a script of its own: scripts.go puts it in front of
-- the semaphore's scripts, sem_acquire.lua, sem_release.lua and
-- sem_extend.lua, which share these steps (after clock.lua).
--
-- A semaphore is a sorted set under its name, KEYS[1]: one member per
-- holder, its random token, scored by when its permit expires, in Unix
-- milliseconds by this node's own clock (TIME). The permit count it was
-- created with is kept beside it, KEYS[2] (absent where a Redis Cluster
-- cannot keep it in the name's slot). Both expire with the last permit.

-- alienSemaphore returns an error reply when key holds what no semaphore
-- leaves: a type other than a sorted set (a Mutex's lock, or another
-- program's key), or a sorted set without an expiry. It returns nil when
-- key is absent or may be a semaphore. The WRONGTYPE prefix makes the
-- client report the node as misconfigured: retrying cannot help.
local function alienSemaphore(key)
	local kind = redis.call("TYPE", key).ok
	if kind == "none" then
		return nil
	end
	if kind == "zset" then
		if redis.call("PTTL", key) ~= -1 then
			return nil
		end
		kind = "zset without expiry"
	end
	return redis.error_reply("WRONGTYPE redlock: the key " .. key .. " holds a " .. kind ..
		", not a semaphore: a Mutex, an RWMutex or another program uses this name")
end

-- keep makes KEYS[1], and KEYS[2] when given, expire with the permit that
-- expires last (at, the time it is read at, in ms), or deletes them when
-- no permit is left.
local function keep(at)
	local last = redis.call("ZRANGE", KEYS[1], -1, -1, "WITHSCORES")
	if #last == 0 then
		-- KEYS[1] is gone already: Redis deletes a sorted set with its
		-- last member.
		if #KEYS > 1 then
			redis.call("DEL", KEYS[2])
		end
		return
	end
	local ttl = math.max(1, tonumber(last[2]) - at)
	redis.call("PEXPIRE", KEYS[1], ttl)
	if #KEYS > 1 then
		redis.call("PEXPIRE", KEYS[2], ttl)
	end
end

-- permit returns the expiry of token's permit on KEYS[1] (false when it
-- holds none) and the node's time, or an error reply when KEYS[1] is not a
-- semaphore. The token's score is read first: only a semaphore holds a
-- permit's token, so when it is there the key's type need not be asked.
local function permit(token)
	local t = now()
	local expiry = redis.pcall("ZSCORE", KEYS[1], token)
	if type(expiry) == "string" then
		return expiry, t
	end
	local bad = alienSemaphore(KEYS[1])
	if bad then
		return bad
	end
	return false, t
end
