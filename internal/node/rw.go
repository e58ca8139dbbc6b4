package node

// A reader-writer lock (the Shapes Write and Read). Its writer takes the
// lock with an Acquire and releases it with a Release of Shape Write; it
// extends, fences and undoes it as a Plain lock. Its readers acquire,
// extend and release read holds (Shape Read): on each node the readers are
// a hash under the lock's name (see rw.lua).

// IntentKey is where each node keeps the mark of a writer that waits for
// the readers of lock name to leave: while it is there, no new reader gets
// in.
func IntentKey(name string) string { return name + ":redlock:writer" }

// ReadRefusal is why a node refused a reader's Acquire: a writer waits
// (true), or a writer or a Mutex holds the lock (false).
type ReadRefusal struct {
	WriterWaits bool
}

// decodeReader reads read_acquire.lua's reply: a grant's node time, or
// {status, n}, for a read hold with a restart delay of minUptime seconds.
func decodeReader(cmd *Cmd, minUptime int64) Reply {
	status, n, rep, done := decodeAdmission(cmd, shapes[Read].acquire, minUptime)
	if done {
		return rep
	}
	if status == 1 {
		return Reply{OK: true}
	}
	return Reply{Value: ReadRefusal{WriterWaits: n == 1}}
}
