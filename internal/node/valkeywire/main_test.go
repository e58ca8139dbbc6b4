// Code generated from internal/node/rueidiswire/main_test.go by go generate ./internal/node/valkeywire; DO NOT EDIT.

package valkeywire_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
