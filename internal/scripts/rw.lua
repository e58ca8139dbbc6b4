-- rw.lua is not a script of its own: scripts.go puts it in front of the
-- reader-writer lock's scripts (after clock.lua and stored.lua).
--
-- A reader-writer lock's writer holds its name, KEYS[1], as a plain lock
-- does: a string, the writer's token, with the lock's TTL. Its readers
-- hold it as a hash: the field MARK, which tells them from a reentrant
-- Mutex's hash, and one field per reader, its random token, whose value
-- is when its hold expires, in Unix milliseconds by this node's clock. The
-- hash expires with its last reader. A Mutex that meets the readers' hash
-- sees a lock held (a hash with an expiry), so it waits as for any holder.

local MARK = "redlock:readers"

-- keep drops the expired readers of key (at t, the node's time in ms),
-- and makes key expire with the last live one; with none left it deletes
-- key and returns false.
local function keep(key, t)
	local all = redis.call("HGETALL", key)
	local last = 0
	for i = 1, #all, 2 do
		if all[i] ~= MARK then
			local expiry = tonumber(all[i + 1])
			if expiry <= t then
				redis.call("HDEL", key, all[i])
			elseif expiry > last then
				last = expiry
			end
		end
	end
	if last == 0 then
		redis.call("DEL", key)
		return false
	end
	redis.call("PEXPIRE", key, last - t)
	return true
end

-- readers drops the expired readers of key and says what key holds:
--   "none"     nothing, or only readers that expired (key is then deleted)
--   "readers"  readers, at least one of them live
--   "lock"     a lock: a string (a writer, or a Mutex) or a hash without
--              MARK (a reentrant Mutex)
--   an error reply when key holds what no lock leaves (see alien in
--              stored.lua)
-- It also returns the node's time, in Unix milliseconds.
local function readers(key)
	local t = now()
	local kind = redis.call("TYPE", key).ok
	if kind == "none" then
		return "none", t
	end
	if kind ~= "hash" or redis.call("HEXISTS", key, MARK) == 0 then
		local bad = alien(key)
		if bad then
			return bad, t
		end
		return "lock", t
	end
	if keep(key, t) then
		return "readers", t
	end
	return "none", t
end

-- hold makes token a reader of key until ttl (text, in ms) from t, and
-- keeps key at least until then.
local function hold(key, token, t, ttl)
	redis.call("HSET", key, MARK, "1", token, t + tonumber(ttl))
	if redis.call("PTTL", key) < tonumber(ttl) then
		redis.call("PEXPIRE", key, ttl)
	end
end
