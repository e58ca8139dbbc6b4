package quorum

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The probe intervals the facade's tests wait out (redlock/health_test.go):
// a change here must change them too.
func TestProbeBounds(t *testing.T) {
	assert.Equal(t, 200*time.Millisecond, probeMax)
	assert.Equal(t, 20*time.Millisecond, probeFirst)
}
