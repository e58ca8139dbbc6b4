package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: run's renewal of
// a permit, its watchers and the node clients all end with the command.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
