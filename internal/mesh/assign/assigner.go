package assign

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/composition"
)

// Verifier opens a node's signed composition; composition.Trust is one.
type Verifier interface {
	OpenFor(ctx context.Context, envelope []byte, node, module, fingerprint string) (composition.Document, error)
}

// Assigner watches the bus, rebuilds the rules' values from it and writes
// the wants Decide gives.
type Assigner struct {
	Bus          *bus.Bus
	Verifier     Verifier
	Now          func() time.Time
	OnlineWindow time.Duration
	// Tick re-decides with nothing new on the bus, since a node going
	// offline changes the canary without a write; 0 is 15 s.
	Tick time.Duration
	// Writers is how many wants are written at once; 0 is 8.
	Writers int
	Logger  *slog.Logger

	written atomic.Int64
}

// Written is how many wants the assigner has written.
func (a *Assigner) Written() int64 { return a.written.Load() }

// change is one entry a watch delivered, or the end of a watch's initial
// values (entry nil).
type change struct {
	bucket string
	entry  jetstream.KeyValueEntry
}

// inbox holds what the watches deliver until the loop takes it: unbounded,
// so a pass of writes never stalls a watch's consumer.
type inbox struct {
	mu      sync.Mutex
	changes []change
	notify  chan struct{}
}

func (in *inbox) put(c change) {
	in.mu.Lock()
	in.changes = append(in.changes, c)
	in.mu.Unlock()
	select {
	case in.notify <- struct{}{}:
	default:
	}
}

func (in *inbox) take() []change {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := in.changes
	in.changes = nil
	return out
}

// Run watches every bucket until ctx ends. It decides once every bucket's
// initial values are read, and again after each batch of changes.
func (a *Assigner) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	box := &inbox{notify: make(chan struct{}, 1)}
	st := newState()
	watched := map[string]bool{}
	errs := make(chan error, 1)
	watch := func(store jetstream.KeyValue) error {
		a.Bus.CountOps(1)
		w, err := store.WatchAll(ctx)
		if err != nil {
			return fmt.Errorf("watch %s: %w", store.Bucket(), err)
		}
		st.pending[store.Bucket()] = true
		go func() {
			defer func() { _ = w.Stop() }()
			for {
				select {
				case <-ctx.Done():
					return
				case e, ok := <-w.Updates():
					if !ok {
						select {
						case errs <- fmt.Errorf("the watch of %s ended", store.Bucket()):
						default:
						}
						return
					}
					box.put(change{bucket: store.Bucket(), entry: e})
				}
			}
		}()
		return nil
	}
	for _, store := range []jetstream.KeyValue{a.Bus.Modules, a.Bus.Builds, a.Bus.Holds, a.Bus.Grants, a.Bus.Wants, a.Bus.Haves} {
		if err := watch(store); err != nil {
			return err
		}
	}
	tick := a.Tick
	if tick <= 0 {
		tick = 15 * time.Second
	}
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errs:
			return err
		case <-box.notify:
		case <-ticker.C:
		}
		for _, c := range box.take() {
			a.apply(ctx, st, c)
		}
		// A registration may name a node whose compositions are not
		// watched yet.
		for _, node := range st.nodes() {
			if watched[node] {
				continue
			}
			store, err := a.Bus.Composed(ctx, node)
			if err != nil {
				a.Logger.Error("cannot open a node's compositions", slog.String("node", node), slog.String("error", err.Error()))
				continue
			}
			if err := watch(store); err != nil {
				return err
			}
			watched[node] = true
		}
		if len(st.pending) > 0 {
			continue // not every bucket read whole yet
		}
		a.pass(ctx, st)
	}
}

// pass decides over the state and writes what it gives. Before it writes
// it reads the holds again and decides with them: the holds' watch and the
// builds' deliver in no order between them, and a hold the bus took before
// the build was done must never be passed over. Holds it cannot read, it
// writes nothing.
func (a *Assigner) pass(ctx context.Context, st *state) {
	in := st.input(a.Now(), a.OnlineWindow, a.Logger)
	writes := Decide(in)
	if len(writes) == 0 {
		return
	}
	holds, err := a.readHolds(ctx)
	if err != nil {
		a.Logger.Error("holds not read again, so no want written", slog.String("error", err.Error()))
		return
	}
	in.Holds = holds
	if writes = Decide(in); len(writes) == 0 {
		return
	}
	start := time.Now()
	workers := a.Writers
	if workers <= 0 {
		workers = 8
	}
	jobs := make(chan Write)
	type done struct {
		place    Place
		want     bus.Want
		revision uint64
		wrote    bool
	}
	results := make(chan done, len(writes))
	var wg sync.WaitGroup
	for range min(workers, len(writes)) {
		wg.Go(func() {
			for w := range jobs {
				revision, wrote, err := a.write(ctx, w, st.wants[w.Place])
				if err != nil {
					a.Logger.Error("want not written", slog.String("node", w.Node), slog.String("module", w.Module), slog.String("error", err.Error()))
					continue
				}
				results <- done{w.Place, w.Want, revision, wrote}
			}
		})
	}
	for _, w := range writes {
		jobs <- w
	}
	close(jobs)
	wg.Wait()
	close(results)
	count := 0
	for r := range results {
		if r.wrote {
			count++
			st.wants[r.place] = heldWant{want: r.want, revision: r.revision}
			a.Logger.Debug("want written", slog.String("node", r.place.Node), slog.String("module", r.place.Module),
				slog.String("fingerprint", r.want.Fingerprint), slog.String("digest", r.want.Digest))
		}
	}
	a.written.Add(int64(count))
	a.Logger.Info("wants written", slog.Int("wants", count), slog.Int("decided", len(writes)),
		slog.Float64("seconds", time.Since(start).Seconds()))
}

// readHolds is every hold as the bus holds it now, read through a consumer
// of the bucket's stream, which answers every write the bus acknowledged.
// A hold that does not decode, or whose key disagrees with it, is left out
// as its watch leaves it out.
func (a *Assigner) readHolds(ctx context.Context) ([]bus.Hold, error) {
	a.Bus.CountOps(1)
	entries, err := bus.ReadAll(ctx, a.Bus.Holds)
	if err != nil {
		return nil, err
	}
	holds := make([]bus.Hold, 0, len(entries))
	for key, raw := range entries {
		k, err := bus.ParseKey(key)
		if err != nil || k.Kind != bus.KindHold {
			continue
		}
		if h, err := bus.DecodeHold(raw); err == nil && h.Module == k.Module && h.Fingerprint == k.Fingerprint {
			holds = append(holds, h)
		}
	}
	return holds, nil
}

// write puts one want under compare-and-swap on the revision the watch
// delivered: one operation when nobody wrote since. A conflict reads the key
// again and decides again whether the want is still the rules' to write.
func (a *Assigner) write(ctx context.Context, w Write, held heldWant) (uint64, bool, error) {
	key, err := bus.WantKey(w.Node, w.Module)
	if err != nil {
		return 0, false, err
	}
	next := bus.Encode(w.Want)
	a.Bus.CountOps(1)
	var revision uint64
	if held.revision == 0 {
		revision, err = a.Bus.Wants.Create(ctx, key, next)
	} else {
		revision, err = a.Bus.Wants.Update(ctx, key, next, held.revision)
	}
	if err == nil {
		return revision, true, nil
	}
	if !bus.IsConflict(err) {
		return 0, false, fmt.Errorf("write %s: %w", key, err)
	}
	wrote, revision, err := a.Bus.Swap(ctx, a.Bus.Wants, key, func(current []byte) ([]byte, bool, error) {
		if current == nil {
			return next, true, nil
		}
		now, err := bus.DecodeWant(current)
		if err != nil || now.Owner != bus.OwnerRules || now.Same(w.Want) {
			return nil, false, nil //nolint:nilerr // not the rules' to write: left as it is
		}
		return next, true, nil
	})
	return revision, wrote, err
}

// heldWant is a want as the watch delivered it, with the revision a write
// over it names.
type heldWant struct {
	want     bus.Want
	revision uint64
}

// unreadable stands for a want that does not decode: no rule writes over
// what it cannot read.
const unreadable bus.Owner = "unreadable"

// state is the bus as the watches delivered it, decoded.
type state struct {
	pending       map[string]bool // buckets whose initial values are not all in
	registrations map[string]bus.Registration
	builds        map[string]bus.Build
	holds         map[string]bus.Hold
	grants        map[string]bus.Grant
	compositions  map[string]Composition // by bucket/key, the verified ones
	wants         map[Place]heldWant
	haves         map[Place]bus.Have
	warned        map[string]bool // keys said to name an unknown module
}

func newState() *state {
	return &state{pending: map[string]bool{}, registrations: map[string]bus.Registration{},
		builds: map[string]bus.Build{}, holds: map[string]bus.Hold{}, grants: map[string]bus.Grant{},
		compositions: map[string]Composition{}, wants: map[Place]heldWant{}, haves: map[Place]bus.Have{}, warned: map[string]bool{}}
}

func (s *state) nodes() []string {
	seen := map[string]bool{}
	for _, r := range s.registrations {
		for _, n := range r.Nodes {
			seen[n] = true
		}
	}
	return slices.Sorted(func(yield func(string) bool) {
		for n := range seen {
			if !yield(n) {
				return
			}
		}
	})
}

// apply takes one change into the state. A document that does not decode,
// or whose key and content disagree, is logged and left out.
func (a *Assigner) apply(ctx context.Context, st *state, c change) {
	if c.entry == nil {
		delete(st.pending, c.bucket)
		return
	}
	key := c.entry.Key()
	deleted := c.entry.Operation() != jetstream.KeyValuePut
	k, err := bus.ParseKey(key)
	if err == nil {
		err = a.take(ctx, st, c, k, deleted)
	}
	if err != nil {
		a.Logger.Warn("skipped a document", slog.String("bucket", c.bucket), slog.String("key", key),
			slog.Uint64("revision", c.entry.Revision()), slog.String("error", err.Error()))
	}
}

func (a *Assigner) take(ctx context.Context, st *state, c change, k bus.Key, deleted bool) error {
	key, raw := c.entry.Key(), c.entry.Value()
	same := func(module, fingerprint string) error {
		if module != k.Module || fingerprint != k.Fingerprint {
			return fmt.Errorf("the document is of %q at %q, its key of %q at %q", module, fingerprint, k.Module, k.Fingerprint)
		}
		return nil
	}
	switch {
	case c.bucket == bus.ModulesBucket && k.Kind == bus.KindModule:
		delete(st.registrations, key)
		if deleted {
			return nil
		}
		r, err := bus.DecodeRegistration(raw)
		if err == nil && r.Module != k.Module {
			err = fmt.Errorf("the registration is of %q, its key of %q", r.Module, k.Module)
		}
		if err == nil {
			st.registrations[key] = r
		}
		return err
	case c.bucket == bus.BuildsBucket && k.Kind == bus.KindBuild:
		return decodeInto(st.builds, key, raw, deleted, bus.DecodeBuild, func(b bus.Build) error { return same(b.Module, b.Fingerprint) })
	case c.bucket == bus.HoldsBucket && k.Kind == bus.KindHold:
		return decodeInto(st.holds, key, raw, deleted, bus.DecodeHold, func(h bus.Hold) error { return same(h.Module, h.Fingerprint) })
	case c.bucket == bus.GrantsBucket && k.Kind == bus.KindGrant:
		return decodeInto(st.grants, key, raw, deleted, bus.DecodeGrant, func(g bus.Grant) error { return same(g.Module, g.Fingerprint) })
	case c.bucket == bus.WantsBucket && k.Kind == bus.KindWant:
		p := Place{Node: k.Node, Module: k.Module}
		if st.wants[p].revision > c.entry.Revision() {
			return nil // the assigner's own later write is held already
		}
		if deleted {
			delete(st.wants, p)
			return nil
		}
		w, err := bus.DecodeWant(raw)
		if err != nil {
			st.wants[p] = heldWant{want: bus.Want{Owner: unreadable}, revision: c.entry.Revision()}
			return err
		}
		st.wants[p] = heldWant{want: w, revision: c.entry.Revision()}
		return nil
	case c.bucket == bus.HavesBucket && k.Kind == bus.KindHave:
		p := Place{Node: k.Node, Module: k.Module}
		delete(st.haves, p)
		if deleted {
			return nil
		}
		h, err := bus.DecodeHave(raw)
		if err == nil {
			st.haves[p] = h
		}
		return err
	case k.Kind == bus.KindComposition:
		id := c.bucket + "/" + key
		delete(st.compositions, id)
		if deleted {
			return nil
		}
		node, err := bus.NodeOfBucket(c.bucket)
		if err != nil {
			return err
		}
		entry, err := bus.DecodeComposed(raw)
		if err == nil && (entry.Node != node || same(entry.Module, entry.Fingerprint) != nil) {
			err = fmt.Errorf("the entry is of %q at %q for %q, its key of %q at %q in %s",
				entry.Module, entry.Fingerprint, entry.Node, k.Module, k.Fingerprint, c.bucket)
		}
		if err != nil {
			return err
		}
		envelope, err := a.Bus.Envelope(ctx, entry)
		if err != nil {
			return err
		}
		if _, err := a.Verifier.OpenFor(ctx, envelope, node, entry.Module, entry.Fingerprint); err != nil {
			return err
		}
		st.compositions[id] = Composition{Node: node, Module: entry.Module, Fingerprint: entry.Fingerprint, Digest: entry.Digest}
		return nil
	}
	return errors.New("not a key of this bucket")
}

func decodeInto[T any](into map[string]T, key string, raw []byte, deleted bool, decode func([]byte) (T, error), check func(T) error) error {
	delete(into, key)
	if deleted {
		return nil
	}
	doc, err := decode(raw)
	if err == nil {
		err = check(doc)
	}
	if err != nil {
		return err
	}
	into[key] = doc
	return nil
}

// input is the state as the rules read it. A build, hold, grant or
// composition of a module nobody registered is logged once and left out.
func (s *state) input(now time.Time, window time.Duration, logger *slog.Logger) Input {
	known := map[string]bool{}
	in := Input{Now: now, OnlineWindow: window, Haves: s.haves, Wants: make(map[Place]bus.Want, len(s.wants))}
	for _, r := range s.registrations {
		known[r.Module] = true
		in.Registrations = append(in.Registrations, r)
	}
	unknown := func(key, module string) bool {
		if known[module] {
			return false
		}
		if !s.warned[key] {
			s.warned[key] = true
			logger.Warn("skipped a document", slog.String("key", key), slog.String("error", fmt.Sprintf("names the unknown module %q", module)))
		}
		return true
	}
	for key, b := range s.builds {
		if !unknown(key, b.Module) {
			in.Builds = append(in.Builds, b)
		}
	}
	for key, h := range s.holds {
		if !unknown(key, h.Module) {
			in.Holds = append(in.Holds, h)
		}
	}
	for key, g := range s.grants {
		if !unknown(key, g.Module) {
			in.Grants = append(in.Grants, g)
		}
	}
	for key, c := range s.compositions {
		if !unknown(key, c.Module) {
			in.Compositions = append(in.Compositions, c)
		}
	}
	for p, w := range s.wants {
		in.Wants[p] = w.want
	}
	return in
}
