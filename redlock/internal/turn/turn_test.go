package turn

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The bounds the facade's tests wait out (redlock/handoff_test.go,
// notify_test.go): a change here must change them too.
func TestBounds(t *testing.T) {
	assert.Equal(t, 5*time.Millisecond, handoffWindow)
}
