-- read_release drops the caller's read hold of a reader-writer lock; when
-- it was the last reader, the lock is free, and waiters are told.
--
-- KEYS[1]  the lock name (see rw.lua, which scripts.go puts in front of
--          this file, after announce.lua)
-- KEYS[2]  the lock's queue of waiters; absent when there is none, or
--          ARGV[2] is ""
-- ARGV[1]  the caller's token
-- ARGV[2]  the channel to announce the release on; "" for none (the undo
--          of a failed attempt frees nothing anyone waits for)
--
-- Returns, when the caller was no live reader (its hold expired, or an
-- earlier try of this same release, resent by the client, dropped it) and
-- KEYS[1] is absent or a readers' hash, the node's run id (see server in
-- stored.lua), or 0 for a release that announces nothing; when KEYS[1]
-- holds a lock (a writer's, a Mutex's: a string, or a reentrant Mutex's
-- hash), it is taken, and the script answers as release.lua does ("taken:"
-- and the run id, -1 for an undo); an error reply when KEYS[1]
-- holds what no lock leaves.
-- When the caller was a reader, it is dropped and the script returns 1,
-- plus, when it was the last reader and ARGV[2] is set, announce(...): 2 ×
-- the clients the announcement reached, + 1 when it named a waiter (the
-- oldest, popped from the queue, goes first, as for a lock).
-- read_release_head.lua, in front of this file, read t, expiry, was and
-- left, and ended the releases of a live reader that left many fields or
-- the mark alone. What is left: a caller that was no live reader, and a
-- live reader that left a few fields (2 to SMALL, the mark among them).
if type(expiry) ~= "string" then
	local state = kind(KEYS[1])
	if type(state) == "table" then
		return state
	end
	if state == "lock" then
		-- Held by a writer or a Mutex: not this reader's, and not free.
		if ARGV[2] ~= "" then
			return "taken:" .. server()
		end
		return -1
	end
end
if not was then
	if ARGV[2] ~= "" then
		return server()
	end
	return 0
end
if keep(KEYS[1], t) then
	return 1 -- other readers hold it: no one waits for this release
end
if ARGV[2] == "" then
	return 1
end
return 1 + announce(ARGV[2], ARGV[1], next_waiter())
