-- rw.lua is not a script of its own: scripts.go puts it in front of the
-- reader-writer lock's scripts (after clock.lua, stored.lua and
-- rw_base.lua, which holds the constants below and the functions a read
-- grant's first lines need).
--
-- A reader-writer lock's writer holds its name, KEYS[1], as a plain lock
-- does: a string, the writer's token, with the lock's TTL. Its readers
-- hold it as a hash: the field MARK, which tells them from a reentrant
-- Mutex's hash, and one field per reader, its random token, whose value
-- is when its hold expires, in Unix milliseconds by this node's clock. The
-- hash expires with its last reader. A Mutex that meets the readers' hash
-- sees a lock held (a hash with an expiry), so it waits as for any holder.
--
-- A reader's grant, extension and release cost the same however many
-- readers hold the name: they touch their own field, not the others'. A
-- reader that expired without a release keeps its field until the hash
-- is pruned: by a writer's attempt, by a release that leaves few fields,
-- and by a grant once the hash has grown to twice its size after the last
-- pruning (MARK's value is that size, so the work is constant per grant on
-- average). Every script reads a field's expiry, never its presence alone.

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

-- kind says what key holds, without looking at its readers:
--   "none"     nothing
--   "readers"  a readers' hash (whose readers may all have expired)
--   "lock"     a lock: a string (a writer, or a Mutex) or a hash without
--              MARK (a reentrant Mutex)
--   an error reply when key holds what no lock leaves (see alien in
--              stored.lua)
local function kind(key)
	local k = redis.call("TYPE", key).ok
	if k == "none" then
		return "none"
	end
	if k ~= "hash" or redis.call("HEXISTS", key, MARK) == 0 then
		return alien(key) or "lock"
	end
	return "readers"
end

-- readers drops the expired readers of key and says what key holds, as
-- kind does, except that a hash whose readers all expired is deleted and
-- reads "none". It also returns the node's time, in Unix milliseconds.
local function readers(key)
	local t = now()
	local state = kind(key)
	if state == "readers" and not keep(key, t) then
		return "none", t
	end
	return state, t
end

-- prune drops the expired readers of the readers' hash key once it has
-- grown to twice its size after the last pruning, and then says whether
-- a live reader is left (true when it did not prune).
local function prune(key, t)
	local size = redis.call("HLEN", key)
	if size < (tonumber(redis.call("HGET", key, MARK)) or 0) then
		return true
	end
	if not keep(key, t) then
		return false
	end
	redis.call("HSET", key, MARK, math.max(PRUNE_MIN, 2 * redis.call("HLEN", key)))
	return true
end
