package engine

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/redlock-go/redlock/internal/node"
)

// The optional features a node may refuse without the lock failing (the
// package report exports their names, redlock/report/node.go).
const (
	FeatureQueue    = "queue"
	FeatureIdentify = "identify"
	FeatureScripts  = "scripts"
	FeatureClock    = "clock"
)

// features records the optional features each node refused.
type features struct {
	mu  sync.Mutex
	off []map[string]error // per node: feature → the error that turned it off
}

func newFeatures(n int) *features { return &features{off: make([]map[string]error, n)} }

// refused records that node i refused feature with err; it reports
// whether this is the first time.
func (f *features) refused(i int, feature string, err error) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.off[i][feature]; ok {
		return false
	}
	if f.off[i] == nil {
		f.off[i] = map[string]error{}
	}
	f.off[i][feature] = err
	return true
}

// of returns node i's refused features, nil when none.
func (f *features) Of(i int) map[string]error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.off[i]) == 0 {
		return nil
	}
	return maps.Clone(f.off[i])
}

// featureOff records that node i refused feature with err and, the first
// time, tells the Redlock's Observer.
func (e *Engine) featureOff(i int, feature string, err error) {
	if e.Features.refused(i, feature, err) && e.Report != nil {
		e.Report(context.Background(), i, fmt.Errorf("redlock: %s off on this node, the lock works without it: %w", feature, err), false)
	}
}

// scriptsOff records that node i refused scripts with why and now speaks
// w, and tells the Observer (once: the node switches once).
func (e *Engine) scriptsOff(i int, w node.Way, why error) {
	if e.Features.refused(i, FeatureScripts, why) && e.Report != nil {
		e.Report(context.Background(), i, fmt.Errorf("redlock: scripts refused, the node is spoken to by %s from now on "+
			"(%s; a Mutex works; semaphores, reader-writer and multi-name locks need scripts): %w", w, e.Pool.Caps(i), node.Classify(why)), false)
	}
}
