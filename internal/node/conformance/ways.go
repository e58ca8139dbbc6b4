package conformance

import (
	"slices"

	"github.com/redlock-go/redlock/internal/node"
)

// Capability is something of a node that a case needs beyond the plain
// lock's grant, extension and release: a kind of lock, or a behaviour.
type Capability string

// The capabilities some way lacks.
const (
	// Semaphore, ReadersWriters and MultiName are kinds of lock: a way
	// that lacks one refuses each of its operations at once, as
	// misconfigured, naming scripting (see Refuses).
	Semaphore      Capability = "semaphore"
	ReadersWriters Capability = "readers and writers"
	MultiName      Capability = "multi-name"
	// Handoff: a release that frees the lock hands it over to the oldest
	// queued waiter whose process listens, in the same step, so that no
	// one else takes it in between.
	Handoff Capability = "hand-over"
	// QuietRelease: a plain release no one is queued for announces
	// nothing (a compare-and-delete and nothing more).
	QuietRelease Capability = "quiet release"
)

// Lacks is the table of ways: what each cannot do. A case that needs what
// its way lacks must fail there (Run checks it), so the table says no more
// than the ways do; the turn's policy (redlock/internal/turn) reads its
// exceptions here.
//
// Beyond what it lacks, a way may answer differently in one stated way
// (see Want): a native release names no queued waiter, since DELIFEQ and
// DELEX cannot pick one: it announces every plain release to every waiter.
var Lacks = map[node.Way][]Capability{
	node.Scripts: nil,
	// WATCH/MULTI/EXEC: no lock but the Mutex's, and no hand-over (the
	// transaction cannot subscribe-check a waiter's process).
	node.Transactions: {Semaphore, ReadersWriters, MultiName, Handoff},
	// The server's own SET IFEQ and DELIFEQ/DELEX where it has them,
	// transactions for the rest: what Transactions lacks, and a release
	// announced whether anyone is queued or not (the delete and the
	// PUBLISH go in one round trip, with no read between them).
	node.Native: {Semaphore, ReadersWriters, MultiName, Handoff, QuietRelease},
}

// Want is the answer a node spoken to in way w gives to op where the case
// expects want: want itself, but for a native plain release, which names
// no waiter (see Lacks).
func Want(w node.Way, op node.Op, want answer) answer {
	if r, ok := op.(*node.Release); ok && r.Shape == node.Plain && w == node.Native {
		want.Named = false
	}
	return want
}

// needs is every capability c needs: those it names, and the kinds of lock
// its operations are of.
func needs(c Case) []Capability {
	out := slices.Clone(c.Needs)
	for _, st := range c.steps("k") {
		if k := kindOf(st.op); k != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// kindOf is the kind of lock op belongs to, "" for the Mutex's.
func kindOf(op node.Op) Capability {
	s, _ := node.ShapeOf(op)
	switch s {
	case node.Semaphore:
		return Semaphore
	case node.Read, node.Write:
		return ReadersWriters
	case node.Multi:
		return MultiName
	}
	return ""
}

// kindOps are the operations of each kind of lock, on name k.
var kindOps = map[Capability]func(k string) []node.Op{
	Semaphore: func(k string) []node.Op {
		return []node.Op{sem(k, "a", 2), semExtend(k, "a"), semRelease(k, "a")}
	},
	ReadersWriters: func(k string) []node.Op {
		return []node.Op{read(k, "r"), readExtend(k, "r"), readRelease(k, "r"), write(k, "w", "t"), writeRelease(k, "w", "t")}
	},
	MultiName: func(k string) []node.Op {
		return []node.Op{multi(k, "a", k+"-b"), multiExtend(k, "a", k+"-b"), multiUnlock(k, "a", k+"-b")}
	},
}

// skipped reports whether w refuses a kind of lock c uses: c is not run.
func skipped(w node.Way, c Case) bool {
	return slices.ContainsFunc(needs(c), func(k Capability) bool { return kindOps[k] != nil && slices.Contains(Lacks[w], k) })
}

// lacks reports whether w lacks a behaviour c needs: c must fail there.
func lacks(w node.Way, c Case) bool {
	return slices.ContainsFunc(needs(c), func(k Capability) bool { return slices.Contains(Lacks[w], k) })
}
