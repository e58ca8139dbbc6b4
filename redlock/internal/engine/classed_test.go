package engine

import (
	"fmt"
	"testing"
)

// Every attempt of a wait asks Classed, a successful one too: it
// allocates nothing (a pair's allocations are a PERFORMANCE.md figure).
func TestClassedAllocatesNothing(t *testing.T) {
	held := fmt.Errorf("%w: 3 of 5 nodes refused", ErrHeld)
	if n := testing.AllocsPerRun(100, func() { _ = Classed(nil); _ = Classed(held) }); n != 0 {
		t.Fatalf("Classed allocates %v times", n)
	}
	if !Classed(held) || Classed(ErrNotAcquired) || Classed(nil) {
		t.Fatal("Classed says a class where there is none, or none where there is one")
	}
}
