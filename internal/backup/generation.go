package backup

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// TimeLayout is the UTC stamp in a generation's name: files-20261026T031500Z.tar.gz.
const TimeLayout = "20060102T150405Z"

// RollbackKeep is how long a rollback copy stays on the claim.
const RollbackKeep = 7 * 24 * time.Hour

// rollbackPrefix starts the name of a copy taken for a Rollback.
const rollbackPrefix = "rollback-"

// requestPattern is what a Rollback's request id may be: it becomes part of a
// file name, so it is kept to a DNS label's alphabet (as Kubernetes names of
// the Job that hands it are) and can never hold a path separator.
var requestPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$`)

// ValidRequest reports why a Rollback request id cannot name a copy, or nil.
func ValidRequest(request string) error {
	if !requestPattern.MatchString(request) {
		return fmt.Errorf("%q is not a request id: 1-63 lowercase letters, digits, '-' or '.', starting and ending with a letter or digit", request)
	}
	if strings.Contains(request, "..") {
		return fmt.Errorf("%q is not a request id: it holds \"..\"", request)
	}
	return nil
}

// Generation is one file this package wrote: a method's scheduled copy, or a
// Rollback's copy when Request is set.
type Generation struct {
	Method  string
	Time    time.Time // UTC, whole seconds
	Request string    // the Rollback request; "" for a scheduled generation
}

// Name is the generation's file name on the claim.
func (g Generation) Name() string {
	base := g.Method + "-" + g.Time.UTC().Format(TimeLayout) + Extension(g.Method)
	if g.Request != "" {
		return rollbackPrefix + g.Request + "-" + base
	}
	return base
}

// ErrNotGeneration is returned for a name this package did not write.
var ErrNotGeneration = errors.New("not a generation name")

// ParseName reads a generation back from its file name. Any other name,
// including a temporary one, is ErrNotGeneration: the pruner only ever
// touches what ParseName accepts.
func ParseName(name string) (Generation, error) {
	rest, rollback := strings.CutPrefix(name, rollbackPrefix)
	for _, m := range methods {
		method := m.Name()
		stem, ok := strings.CutSuffix(rest, m.Extension())
		if !ok || len(stem) < len(TimeLayout)+1 {
			continue
		}
		stamp := stem[len(stem)-len(TimeLayout):]
		head := stem[:len(stem)-len(TimeLayout)]
		t, err := time.Parse(TimeLayout, stamp)
		if err != nil {
			continue
		}
		g := Generation{Method: method, Time: t.UTC()}
		if !rollback {
			if head != method+"-" {
				continue
			}
			return g, nil
		}
		request, ok := strings.CutSuffix(head, "-"+method+"-")
		if !ok || ValidRequest(request) != nil {
			continue
		}
		g.Request = request
		return g, nil
	}
	return Generation{}, fmt.Errorf("%q: %w", name, ErrNotGeneration)
}

// Prune decides which of the claim's file names to delete after a run of
// method: its scheduled generations beyond the newest retain, and its
// Rollback copies older than RollbackKeep at now. Names of other methods,
// temporary names and anything else are never chosen, nor is a generation
// stamped after now: a clock that ran ahead wrote it, and ranked it would
// push out the generation this run just wrote. written, the name this run
// wrote, is never chosen and takes the first of the retain places, whatever
// its time: a clock stepped back since an earlier run stamps it older than
// that run's. The result is sorted.
func Prune(names []string, method string, retain int, now time.Time, written string) []string {
	var scheduled []Generation
	byGen := map[Generation]string{}
	var doomed []string
	if retain < 1 {
		retain = 1 // never prune the last scheduled generation, whatever the caller says
	}
	for _, name := range names {
		g, err := ParseName(name)
		if err != nil || g.Method != method || g.Name() != name {
			continue
		}
		if name == written {
			if g.Request == "" {
				retain--
			}
			continue
		}
		byGen[g] = name
		if g.Time.After(now) {
			continue
		}
		if g.Request != "" {
			if now.Sub(g.Time) > RollbackKeep {
				doomed = append(doomed, name)
			}
			continue
		}
		scheduled = append(scheduled, g)
	}
	slices.SortFunc(scheduled, func(a, b Generation) int { return b.Time.Compare(a.Time) })
	for _, g := range scheduled[min(retain, len(scheduled)):] {
		doomed = append(doomed, byGen[g])
	}
	slices.Sort(doomed)
	return doomed
}
