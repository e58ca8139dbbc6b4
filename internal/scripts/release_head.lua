-- release_head.lua is not a script of its own: scripts.go puts it first in
-- release.lua's source, ahead of the functions the rest needs, so that a
-- release no one waits for runs this and nothing else (Lua makes a
-- closure of each local function a script defines, on every call, whether
-- it runs or not).
--
-- A plain lock's release (two keys) or an undo (ARGV[2] ""), not a
-- writer's (three keys), reads KEYS[1] here, once: the rest of release.lua
-- reads it from got. When it holds the caller's token, an undo is a
-- compare-and-delete that returns 1; a plain release pops the oldest
-- waiter (ZPOPMIN) other than the releaser's own member (ARGV[4], which it
-- removes unless ARGV[5], its score, shows it gone: see below). With no
-- one queued on this node (the queue KEYS[2] does not exist) it is a
-- compare-and-delete too, announced to no one. No one queued means no one
-- to name or hand the lock over to, and no announcement to every waiter
-- either: a waiter that is not queued here (its queueing is on its way,
-- or this node refused it) has not missed a vote, only a wake; it tries
-- again at the end of its back-off (see redlock/internal/turn/turn.go).
-- Otherwise release.lua goes on with the waiter popped in popped ("" for
-- none: a queue that held the releaser alone, or a pop the node refused;
-- every waiter is then told) and the removal done (removed set). A
-- hand-over in a run of them so calls GET, ZPOPMIN and SET once each, and
-- no EXISTS, ZREM or DEL.
local got, popped, removed
if #KEYS < 3 then
	got = redis.pcall("GET", KEYS[1])
	if got == ARGV[1] then
		if ARGV[2] == "" then
			redis.call("DEL", KEYS[1])
			return 1
		end
		if #KEYS == 2 then
			-- The oldest waiter first. When it is the releaser's own member
			-- (ARGV[4]), the next is popped; when it came after that member
			-- (a score above ARGV[5], the member's), the member is not
			-- queued, or it would have come first; otherwise the member is
			-- removed, since it may be queued behind.
			local own, since = ARGV[4] or "", tonumber(ARGV[5] or "")
			removed = 0
			local p = redis.pcall("ZPOPMIN", KEYS[2])
			local refused = type(p) ~= "table" or p.err
			if own ~= "" and not refused and p[1] == own then
				removed = 1
				p = redis.pcall("ZPOPMIN", KEYS[2])
				refused = type(p) ~= "table" or p.err
			elseif own ~= "" and (refused or p[1] and not (since and tonumber(p[2]) > since)) then
				removed = redis.pcall("ZREM", KEYS[2], own)
			end
			-- No one queued but, perhaps, the releaser: a queue that held
			-- it alone is told as before (every waiter).
			if removed ~= 1 and (refused and redis.pcall("EXISTS", KEYS[2]) == 0 or not refused and p[1] == nil) then
				redis.call("DEL", KEYS[1])
				return 1
			end
			popped = (not refused and p[1]) or ""
		end
	end
end
