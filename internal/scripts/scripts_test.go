package scripts

import (
	"crypto/sha1" //nolint:gosec // the digest Redis names scripts by, not a security use
	"encoding/hex"
	"testing"
)

// TestDigests checks each script's constant digest against its source. It
// runs in the normal mode: FIPS 140-only mode refuses SHA-1, which is why
// the digests are constants.
func TestDigests(t *testing.T) {
	all := append([]*Script{SetFenced}, All...)
	for _, s := range all {
		sum := sha1.Sum([]byte(s.Source))
		if got := hex.EncodeToString(sum[:]); got != s.Hash {
			t.Errorf("the script whose digest is %q has changed: its digest is now %q", s.Hash, got)
		}
	}
}
