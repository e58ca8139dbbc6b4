package redlock

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/redlock-go/redlock/redlock/internal/engine"
)

// Names returns the names the Mutex holds: its name, and for a multi-name
// lock (see [Redlock.NewMultiMutex]) the others after it.
func (m *Mutex) Names() []string { return m.lock.names(m.h.Name) }

// checkNames refuses no names, an empty name and a name given twice.
func checkNames(names []string) error {
	if len(names) == 0 {
		return engine.Invalid("no lock names")
	}
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		if n == "" {
			return engine.Invalid("empty lock name at index %d", i)
		}
		if seen[n] {
			return engine.Invalid("lock name %q given twice", n)
		}
		seen[n] = true
	}
	return nil
}

// quoted is the Mutex's name, or names, quoted for an error message.
func (m *Mutex) quoted() string { return m.lock.quote(m.h.Name) }

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return fmt.Sprintf("[%s]", strings.Join(q, " "))
}
