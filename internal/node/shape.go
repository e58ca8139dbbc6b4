package node

// A lock's life on a node is three operations, whatever its kind: Acquire,
// Extend and Release, each one type with a Shape. The shape picks the
// script, its keys and arguments, and how its reply reads (see each
// operation's args and Decode); the rules the transport and the layers
// above read of a lock's operations are stated here, once per shape, the
// same for all three. No operation works its shape out from its other
// fields.

// Shape is the kind of lock an operation is about, as a node keeps it.
type Shape uint8

// The shapes of a lock.
const (
	// Plain is a key that holds one token, fenced or not. An RWMutex's
	// writer extends and fences its lock as a Plain one.
	Plain Shape = iota
	// Reentrant is a hash under the name whose one field, the
	// acquisition's token, counts its holds.
	Reentrant
	// Multi is one token on several names, Key and Also, taken, extended
	// and released in one script, all or none (see acquire_multi.lua). The
	// names share one layout, since a Redis Cluster node needs them in one
	// hash slot (see SameSlot), and keep nothing beside them.
	Multi
	// Write is a reader-writer lock's writer: a plain lock that live
	// readers refuse, and whose refused attempts mark the writer waiting
	// (see IntentKey). It has no Extend of its own.
	Write
	// Read is a reader-writer lock's read hold: the readers are a hash
	// under the name, one field per token (see rw.lua).
	Read
	// Semaphore is a counting semaphore's permit: a sorted set under the
	// name, one member per holder (its token) scored by when its permit
	// expires on the node's clock, and its permit count beside it
	// (PermitsKey).
	Semaphore
	// Any is whatever a name holds, a lock of any shape or a semaphore:
	// only a Release, an operator's, deletes it whoever holds it.
	Any
)

// shapeRule is what holds for every operation of a shape.
type shapeRule struct {
	// acquire, extend and release name the shape's operations in errors
	// and tests ("" for one it has none of).
	acquire, extend, release string
	// concurrent: the shape's operations commute with those of its other
	// holders (see Concurrent), as readers never refuse one another.
	concurrent bool
	// transacts: the shape's operations have a way without scripts (see
	// Transacted). Otherwise a node that refuses scripts refuses them as
	// needing scripts for scripted, or, when "", for the operation itself.
	transacts bool
	scripted  string
	// native: the shape's operations have the server's own commands,
	// batched in the node's pipeline as scripts are (see native.go); a
	// grant's only when neither fenced nor restart-delayed.
	native bool
}

// shapes are the rules of each shape.
var shapes = [...]shapeRule{
	Plain:     {acquire: "acquire", extend: "extend", release: "release", transacts: true, native: true},
	Reentrant: {acquire: "reentrant acquire", extend: "reentrant extend", release: "reentrant release", transacts: true},
	Multi:     {acquire: "multi acquire", extend: "multi extend", release: "multi release", scripted: "a multi-name lock"},
	Write:     {acquire: "write acquire", release: "write release", scripted: "a reader-writer lock"},
	Read:      {acquire: "read acquire", extend: "read extend", release: "read release", concurrent: true},
	Semaphore: {acquire: "semaphore acquire", extend: "semaphore extend", release: "semaphore release"},
	Any:       {release: "force release", transacts: true},
}

// ShapeOf returns the shape of op, a lock's Acquire, Extend or Release;
// false for any other operation.
func ShapeOf(op Op) (Shape, bool) {
	switch o := op.(type) {
	case *Acquire:
		return o.Shape, true
	case *Extend:
		return o.Shape, true
	case *Release:
		return o.Shape, true
	}
	return 0, false
}

// WithoutScripts returns nil when op can be carried without scripts, and
// otherwise the error that refuses it (wrapping ErrNoScripts), with why,
// the node's refusal of scripts, when known.
func WithoutScripts(op Op, why error) error {
	if s, ok := ShapeOf(op); ok {
		switch r := shapes[s]; {
		case r.transacts:
			return nil
		case r.scripted != "":
			return noScripts(r.scripted, why)
		}
	} else if _, ok := op.(Transacted); ok {
		return nil
	}
	return noScripts("the "+op.Name()+" operation", why)
}

// holder is the token of a lock operation's holder, and whether its shape
// makes it Concurrent.
func holder(s Shape, token string) (string, bool) {
	if !shapes[s].concurrent {
		return "", false
	}
	return token, true
}

// flag is a script's boolean argument.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
