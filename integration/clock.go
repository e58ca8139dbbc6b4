package integration

// Nodes whose wall clock a test moves while they run. Redis expires keys by
// its wall clock, so a node whose clock jumps ahead drops keys early. The
// image (scripts/build-faketime-image.sh) preloads libfaketime, which adds
// the offset written in /clock/offset to every wall-clock read, re-reading
// the file on each call; the monotonic clock is left alone, so Redis's own
// timers keep running. Each node gets a host directory bind-mounted at
// /clock, and SetClock replaces the file in it.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// FaketimeImage returns the image WithClocks runs, $REDLOCK_FAKETIME_IMAGE,
// or an error saying how to get it when that is unset.
func FaketimeImage() (string, error) {
	if img := os.Getenv("REDLOCK_FAKETIME_IMAGE"); img != "" {
		return img, nil
	}
	return "", errors.New("integration: REDLOCK_FAKETIME_IMAGE is unset: run the tests with `make test` " +
		"or through scripts/with-redis-env.sh, which builds the image with scripts/build-faketime-image.sh " +
		"(if it did, its log says why the build failed)")
}

// WithClocks runs every node from FaketimeImage with a wall clock that
// SetClock moves. Nodes start with an offset of zero. Start fails when
// REDLOCK_FAKETIME_IMAGE is unset. Without it (the default) nodes run
// Image() on the real clock.
func WithClocks() Option { return func(c *startConfig) { c.clocks = true } }

// clockFile is the file libfaketime reads in the container
// (FAKETIME_TIMESTAMP_FILE); the host directory holding it is mounted at
// clockMount.
const (
	clockMount = "/clock"
	clockFile  = "offset"
)

// newClockDir creates the host directory mounted at /clock for one node,
// holding an offset of zero.
func newClockDir() (string, error) {
	dir, err := os.MkdirTemp("", "redlock-clock-")
	if err != nil {
		return "", fmt.Errorf("integration: clock directory: %w", err)
	}
	// The server may run as another user than the test (rootless engines).
	if err := os.Chmod(dir, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("integration: clock directory: %w", err)
	}
	if err := writeOffset(dir, 0); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// SetClock moves node i's wall clock to the real time plus offset (which
// may be negative or fractional); the node sees the change on its next
// clock read. It fails when the cluster was started without WithClocks.
func (c *Cluster) SetClock(i int, offset time.Duration) error {
	dir := c.nodes[i].clockDir
	if dir == "" {
		return c.wrap("set clock of", i, errors.New("started without WithClocks"))
	}
	return c.wrap("set clock of", i, writeOffset(dir, offset))
}

// writeOffset replaces dir's offset file in one rename, so that the
// server never reads a partly written one.
func writeOffset(dir string, offset time.Duration) error {
	tmp, err := os.CreateTemp(dir, clockFile+".tmp-")
	if err != nil {
		return fmt.Errorf("integration: write clock offset: %w", err)
	}
	_, err = tmp.WriteString(faketimeOffset(offset) + "\n")
	err = errors.Join(err, tmp.Chmod(0o644), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, clockFile))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("integration: write clock offset: %w", err)
	}
	return nil
}

// faketimeOffset formats offset as libfaketime reads a relative time:
// signed seconds, with a fraction when there is one ("+60", "-1.5").
func faketimeOffset(offset time.Duration) string {
	s := strconv.FormatFloat(offset.Seconds(), 'f', -1, 64)
	if offset >= 0 {
		s = "+" + s
	}
	return s
}
