// Package lease is a primitive value's hold on its lock: the Holder, one
// per Mutex, Semaphore or read half of an RWMutex, makes each acquisition
// its Lease (token, validity, loss timer, fencing token) and ends it, by
// release, loss or the engine's close; it extends it, renews it in the
// background, and tells the facade's Observer of its calls and of each
// lease's end through the Events it was handed. A Kind gives the node
// operations that differ between primitives (release, undo, extension).
//
// It stands on internal/engine (acquisitions, releases and extensions as
// rounds, the engine's record of the leases held) and knows nothing of
// the turn (internal/turn) or the facade.
package lease
