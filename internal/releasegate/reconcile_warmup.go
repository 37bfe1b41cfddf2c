package releasegate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/JorisJonkers-dev/delivery/internal/jsondoc"
	"github.com/JorisJonkers-dev/delivery/internal/owntraffic"
	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// warmupsAtOnce bounds the warmups that run side by side.
const warmupsAtOnce = 4

// Warmer warms a served revision up; *owntraffic.Warmer is one.
type Warmer interface {
	Warm(ctx context.Context, hosts, paths []string) (owntraffic.Warmup, error)
}

// warmups run beside the rounds: one takes as long as its requests take (up
// to 10 s each), and no round waits for it. A round starts the warmup of a
// revision that serves and is not warmed; a later round writes its verdict.
type warmups struct {
	mu      sync.Mutex
	running map[warmKey]bool
	done    map[warmKey]release.WarmupRecord
	slots   chan struct{}
	wg      sync.WaitGroup
	// finished, when set, is called as each warmup ends, to bring the round
	// that writes its verdict forward.
	finished func()
}

// warmKey is one Application's warmup of one revision; app is
// namespace/application.
type warmKey struct{ app, revision string }

// warmupOf is the verdict of the warmup of key when it has ended, and
// otherwise starts it, unless it is running.
func (t *Reconciler) warmupOf(ctx context.Context, key warmKey, w *Warm) (release.WarmupRecord, bool) {
	ws := &t.warmups
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if verdict, ok := ws.done[key]; ok {
		// Kept until the record carries it: a write that fails takes it
		// again next round, rather than warming the revision twice.
		return verdict, true
	}
	if ws.running[key] {
		return release.WarmupRecord{}, false
	}
	ws.running[key] = true
	ws.wg.Go(func() {
		ws.slots <- struct{}{}
		verdict, ok := t.warm(ctx, w)
		<-ws.slots
		ws.mu.Lock()
		delete(ws.running, key)
		if ok {
			ws.done[key] = verdict
		}
		// One round brought forward for a batch of warmups, once the last
		// of them ends; the ticks write the verdicts that end before it.
		last := len(ws.running) == 0
		ws.mu.Unlock()
		if ok && last && ws.finished != nil {
			ws.finished()
		}
	})
	return release.WarmupRecord{}, false
}

// recorded drops a verdict the record now carries.
func (ws *warmups) recorded(key warmKey) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	delete(ws.done, key)
}

// forget drops the verdicts no round asks for any more (the Application
// moved on before its warmup ended), but not those of an Application the
// round could not decide for.
func (ws *warmups) forget(wanted map[warmKey]bool, undecided map[string]bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for key := range ws.done {
		if !wanted[key] && !undecided[key.app] {
			delete(ws.done, key)
		}
	}
}

// warm requests the paths through each host, host after host, stopping at
// the first failure. ok is false when ctx ended first: the
// revision is warmed by a later round then.
func (t *Reconciler) warm(ctx context.Context, w *Warm) (release.WarmupRecord, bool) {
	if w.Err != nil {
		return WarmupVerdict(w.Revision, owntraffic.Warmup{}, w.Err), true
	}
	var total owntraffic.Warmup
	for _, target := range w.Targets {
		// Members sharing a host hand their paths together, which can come
		// to more than one call of the warmer takes: they go a call's worth
		// at a time.
		for paths := range slices.Chunk(target.Paths, owntraffic.MaxPaths+1) {
			got, err := t.warmer.Warm(ctx, []string{target.Host}, paths)
			if ctx.Err() != nil {
				return release.WarmupRecord{}, false
			}
			total.Requests += got.Requests
			if err != nil || got.Failed() {
				return WarmupVerdict(w.Revision, got, err), true
			}
		}
	}
	return WarmupVerdict(w.Revision, total, nil), true
}

// The webhook metadata keys that hand the gate a member's public hostnames
// and its Route paths, each a JSON array of strings encoded as one string
// inside Flagger's string map. The paths are the ones the own traffic of
// /checks requests; warmup reads the same key.
const (
	MetadataHosts       = "hosts"
	metadataWarmupPaths = "paths"
)

// WarmTarget is one public hostname and the paths requested through it.
type WarmTarget struct {
	Host  string
	Paths []string
}

// Warm asks for the serving revision to be warmed up through targets.
type Warm struct {
	Revision string
	Targets  []WarmTarget
	// Err is why the targets could not be read; the warmup then fails
	// without a request.
	Err error
}

// WarmTargets reads each member's public hostnames and paths from its
// Canary's webhook metadata (the union over its webhooks) and gathers them
// by host: each host with every path of every member its Canary hands it,
// in the order first met, so a path two members share is requested once.
func WarmTargets(members []MemberView) ([]WarmTarget, error) {
	var out []WarmTarget
	index := map[string]int{}
	for _, m := range members {
		var hosts, paths []string
		for _, md := range m.Canary.Webhooks {
			h, err := metadataList(md, MetadataHosts)
			if err != nil {
				return nil, fmt.Errorf("Canary %s: %w", m.Process, err)
			}
			p, err := metadataList(md, metadataWarmupPaths)
			if err != nil {
				return nil, fmt.Errorf("Canary %s: %w", m.Process, err)
			}
			hosts, paths = union(hosts, h), union(paths, p)
		}
		if len(paths) == 0 {
			continue
		}
		for _, h := range hosts {
			i, ok := index[h]
			if !ok {
				i = len(out)
				index[h] = i
				out = append(out, WarmTarget{Host: h})
			}
			out[i].Paths = union(out[i].Paths, paths)
		}
	}
	return out, nil
}

func metadataList(md map[string]string, key string) ([]string, error) {
	raw, ok := md[key]
	if !ok {
		return nil, nil
	}
	var out []string
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, fmt.Errorf("webhook metadata %s is not a JSON array of strings: %s", key, jsondoc.OneLine(err))
	}
	return out, nil
}

func union(have, more []string) []string {
	for _, s := range more {
		seen := false
		for _, h := range have {
			seen = seen || h == s
		}
		if !seen {
			have = append(have, s)
		}
	}
	return have
}

// WarmupVerdict is what the record keeps of a warmup: warmed when no request
// failed (and so when no public host reaches the Application and nothing was
// requested), else the first failing request and its status. err is a warmup
// that could not request at all: its cause stands in for the request.
func WarmupVerdict(revision string, w owntraffic.Warmup, err error) release.WarmupRecord {
	switch {
	case err != nil:
		return release.WarmupRecord{Revision: revision, Failed: &release.WarmupFailure{Request: release.Clip(err.Error())}}
	case w.Failure != nil && (w.Failure.Status < 100 || w.Failure.Status > 599):
		// HTTP has no status outside 100-599, though a server can send one:
		// that is no HTTP answer, and the record keeps it as none.
		return release.WarmupRecord{Revision: revision, Failed: &release.WarmupFailure{Request: w.Failure.Host + w.Failure.Path}}
	case w.Failure != nil:
		return release.WarmupRecord{Revision: revision, Failed: &release.WarmupFailure{Request: w.Failure.Host + w.Failure.Path, Status: w.Failure.Status}}
	}
	return release.WarmupRecord{Revision: revision, Warmed: true}
}
