-- read_acquire_head.lua is not a script of its own: scripts.go puts it
-- first in read_acquire.lua's source, after clock.lua and rw_base.lua and
-- ahead of the functions only the rest needs (Lua makes a closure of each
-- local function a script defines, on every call, whether it runs or
-- not). A grant with no restart delay to check (ARGV[3] "0") to a name
-- that holds nothing, or holds readers whose hash needs no pruning (see
-- prune in rw.lua), runs this and nothing else, and answers as the rest
-- of read_acquire.lua would. It only reads before it decides: anything
-- else goes on below, from the start.
if ARGV[3] == "0" then
	local k = redis.call("TYPE", KEYS[1]).ok
	local mark = k == "hash" and tonumber(redis.call("HGET", KEYS[1], MARK))
	if k == "none" or mark and redis.call("HLEN", KEYS[1]) < mark then
		local t = now()
		if not (mark and live(KEYS[1], ARGV[1], t)) and #KEYS > 1 and redis.call("EXISTS", KEYS[2]) == 1 then
			return {0, 1}
		end
		hold(KEYS[1], ARGV[1], t, ARGV[2], k == "none")
		return t
	end
end
