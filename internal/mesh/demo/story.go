package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/composition"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/view"
)

// tell walks the delivery: a build delivered canary first, a build whose
// check fails rolled back on the canary with no other node moving, and a
// put of it by hand on one node, rolled back there too and stuck.
func (w *world) tell(ctx context.Context) error {
	reg, _ := bus.ModuleKey(module)
	if err := w.put(ctx, w.bus.Modules, reg, bus.Registration{Module: module, Nodes: w.nodes, Providers: []string{}}); err != nil {
		return err
	}
	w.s.say("\nThe module %s is registered on %v: a small HTTP server.", module, w.nodes)
	// A node is online once its agent has written a have; the canary is
	// the first online by name, so the build waits until all three are.
	for _, n := range w.nodes {
		key, _ := bus.HaveKey(n, module)
		if err := waitFor(ctx, n+" online", func() bool { _, err := w.bus.Haves.Get(ctx, key); return err == nil }); err != nil {
			return err
		}
	}
	w.s.say("  Each agent has said it is there and runs nothing of it yet.")

	// 1. A build, delivered canary first.
	if err := w.build(ctx, "rev-1", "f1", true); err != nil {
		return err
	}
	w.s.say("\nCI's build f1 of %s is done, its compositions signed for each node, its grant there.", module)
	canaryAt, err := w.waitHave(ctx, w.nodes[0], "f1", true)
	if err != nil {
		return err
	}
	w.s.say("  %s, the canary, applied f1 first: it answers %q.", w.nodes[0], w.serves(w.nodes[0]))
	for _, n := range w.nodes[1:] {
		if _, err := w.waitHave(ctx, n, "f1", true); err != nil {
			return err
		}
		want, _ := w.want(ctx, n)
		if want.At.Before(canaryAt) {
			return fmt.Errorf("%s was given f1 at %s, before the canary ran it healthy at %s", n, want.At, canaryAt)
		}
		w.s.say("  %s followed once the canary was healthy: it answers %q.", n, w.serves(n))
	}
	if err := w.waitView(ctx, "rev-1 delivered", func(p view.Picture) bool { return p.Revision == "rev-1" && p.Delivered }); err != nil {
		return err
	}
	w.s.say("  The view: revision rev-1 is delivered.")

	// 2. A build whose check fails on the canary.
	if err := w.build(ctx, "rev-2", "f2", false); err != nil {
		return err
	}
	w.s.say("\nCI's build f2 is done; on the canary its health check fails.")
	if err := w.waitBack(ctx, w.nodes[0], "f2", time.Time{}); err != nil {
		return err
	}
	w.s.say("  %s applied f2, which did not pass its health within %s: it went back to f1 by itself and answers %q.",
		w.nodes[0], healthWithin, w.serves(w.nodes[0]))
	if err := waitFor(ctx, w.nodes[0]+" wanting f1 again", func() bool { want, _ := w.want(ctx, w.nodes[0]); return want.Fingerprint == "f1" }); err != nil {
		return err
	}
	w.s.say("  The assigner takes f2 as failed on %s and wants f1 there again.", w.nodes[0])
	for _, n := range w.nodes[1:] {
		if want, _ := w.want(ctx, n); want.Fingerprint != "f1" {
			return fmt.Errorf("%s was given %s while the canary went back from it", n, want.Fingerprint)
		}
		w.s.say("  %s did not move: it still runs f1 and answers %q.", n, w.serves(n))
	}

	// 3. A put by hand on one node.
	stalls, err := w.nc.SubscribeSync("mesh.events.stall")
	if err != nil {
		return err
	}
	defer func() { _ = stalls.Unsubscribe() }()
	last := w.nodes[len(w.nodes)-1]
	entry, _, err := w.bus.ReadComposition(ctx, last, module, "f2")
	if err != nil {
		return err
	}
	given := time.Now().UTC()
	// The operator's seal, which no part may write, is what makes it a put.
	if err := w.bus.SealWant(ctx, last, module, bus.Want{Fingerprint: "f2", Digest: entry.Digest, Owner: bus.PutOwner("demo"), At: given}); err != nil {
		return err
	}
	w.s.say("\nAn operator puts f2 on %s by hand (owner put:demo), past the rules.", last)
	if err := w.waitBack(ctx, last, "f2", given); err != nil {
		return err
	}
	if want, _ := w.want(ctx, last); want.Owner != bus.PutOwner("demo") {
		return fmt.Errorf("the assigner wrote over the put: %+v", want)
	}
	w.s.say("  %s tried f2 as put, and it went back to f1 too; the assigner leaves the put alone.", last)
	if err := w.waitView(ctx, last+" stuck", func(p view.Picture) bool { return stateOf(p, last) == view.StateStuck }); err != nil {
		return err
	}
	w.s.say("  The view: %s is stuck on f2 (no progress for %s).", last, w.s.StuckAfter)
	for {
		m, err := stalls.NextMsg(time.Minute)
		if err != nil {
			return fmt.Errorf("the watchman said no stall: %w", err)
		}
		if strings.Contains(string(m.Data), `"node":"`+last+`"`) {
			w.s.say("  The watchman: a stall on mesh.events.stall, %s.", m.Data)
			break
		}
	}

	// 4. Hand wants of compositions no node may apply.
	if err := w.refusals(ctx); err != nil {
		return err
	}
	w.s.say("\nThe story is told.")
	return nil
}

// refusals writes, by hand on every node, a want of a composition signed
// by a key no node trusts, then of one altered by a byte after signing:
// every node refuses both and runs on what it ran.
func (w *world) refusals(ctx context.Context) error {
	keys, err := composition.NewKeyPair()
	if err != nil {
		return err
	}
	stranger := keys.Signer
	ran := map[string]string{}
	for _, n := range w.nodes {
		ran[n] = w.serves(n)
	}
	for _, c := range []struct {
		fingerprint, what string
		alter             bool
		signer            *composition.Signer
	}{
		{"f3", "signed by a key no node trusts", false, stranger},
		{"f4", "altered by one byte after it was signed", true, w.signer},
	} {
		given := time.Now().UTC()
		for _, n := range w.nodes {
			envelope, err := w.compose(ctx, c.signer, n, c.fingerprint, true)
			if err != nil {
				return err
			}
			digest := bus.Digest(envelope)
			if c.alter {
				altered := []byte(strings.Replace(string(envelope), `"payload":"`, `"payload":"A`, 1))
				if _, err := w.bus.WriteComposition(ctx, n, module, c.fingerprint, altered); err != nil {
					return err
				}
			}
			if err := w.bus.SealWant(ctx, n, module, bus.Want{Fingerprint: c.fingerprint, Digest: digest, Owner: bus.OwnerHand, At: time.Now().UTC()}); err != nil {
				return err
			}
		}
		w.s.say("\nBy hand, every node is given %s, %s.", c.fingerprint, c.what)
		for _, n := range w.nodes {
			have, _ := bus.HaveKey(n, module)
			var h bus.Have
			if err := waitFor(ctx, n+" refusing "+c.fingerprint, func() bool {
				entry, err := w.bus.Haves.Get(ctx, have)
				if err != nil {
					return false
				}
				h, err = bus.DecodeHave(entry.Value())
				return err == nil && h.Phase == bus.PhaseRefused && !h.At.Before(given)
			}); err != nil {
				return err
			}
			if got := w.serves(n); got != ran[n] {
				return fmt.Errorf("%s answers %q after refusing %s, not %q", n, got, c.fingerprint, ran[n])
			}
			w.s.say("  %s refused it (%s) and runs on: it answers %q.", n, h.Reason, ran[n])
		}
	}
	return nil
}

// build writes a build done of fingerprint with its grant, each node's
// signed composition, and the revision CI built.
func (w *world) build(ctx context.Context, revision, fingerprint string, healthy bool) error {
	now := time.Now().UTC()
	for _, n := range w.nodes {
		if _, err := w.compose(ctx, w.signer, n, fingerprint, healthy); err != nil {
			return err
		}
	}
	grant, _ := bus.GrantKey(module, fingerprint)
	if err := w.put(ctx, w.bus.Grants, grant, bus.Grant{Module: module, Fingerprint: fingerprint, At: now}); err != nil {
		return err
	}
	if err := view.WriteSource(ctx, w.sources, view.Source{Revision: revision, Modules: map[string]string{module: fingerprint}, At: now}); err != nil {
		return err
	}
	key, _ := bus.BuildKey(module, fingerprint)
	return w.put(ctx, w.bus.Builds, key, bus.Build{Module: module, Fingerprint: fingerprint, State: bus.BuildDone, At: now})
}

// compose signs node's composition of the module at fingerprint and puts
// it on the bus; it answers the envelope.
func (w *world) compose(ctx context.Context, signer *composition.Signer, node, fingerprint string, healthy bool) ([]byte, error) {
	doc := composition.Document{Module: module, Fingerprint: fingerprint, Node: node, Files: map[string]composition.File{
		"etc/hello.conf": {Content: "fingerprint=" + fingerprint + "\n", Mode: "0644"},
	}, Command: composition.Command{Argv: w.s.Module, Env: w.moduleEnv(node, fingerprint, healthy)},
		Health: composition.Health{HTTP: "http://" + w.addrs[node] + "/healthz",
			Interval: composition.Duration(200 * time.Millisecond), Timeout: composition.Duration(200 * time.Millisecond)}}
	envelope, err := composition.Sign(ctx, signer, doc)
	if err != nil {
		return nil, err
	}
	if _, err := w.bus.WriteComposition(ctx, node, module, fingerprint, envelope); err != nil {
		return nil, err
	}
	return envelope, nil
}

func (w *world) put(ctx context.Context, kv jetstream.KeyValue, key string, doc any) error {
	if _, err := kv.Put(ctx, key, bus.Encode(doc)); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

func (w *world) want(ctx context.Context, node string) (bus.Want, error) {
	key, _ := bus.WantKey(node, module)
	entry, err := w.bus.Wants.Get(ctx, key)
	if err != nil {
		return bus.Want{}, err
	}
	return bus.DecodeWant(entry.Value())
}

// waitBack waits until node's have says it went back to f1 from
// fingerprint, written after since.
func (w *world) waitBack(ctx context.Context, node, fingerprint string, since time.Time) error {
	key, _ := bus.HaveKey(node, module)
	var last bus.Have
	err := waitFor(ctx, fmt.Sprintf("%s back from %s", node, fingerprint), func() bool {
		entry, err := w.bus.Haves.Get(ctx, key)
		if err != nil {
			return false
		}
		if last, err = bus.DecodeHave(entry.Value()); err != nil {
			return false
		}
		return last.RolledBackFrom() == fingerprint && last.Fingerprint == "f1" && last.Health == bus.Healthy && last.At.After(since)
	})
	if err != nil {
		return fmt.Errorf("%w; last have %+v", err, last)
	}
	return nil
}

// waitHave waits until node's have runs fingerprint, healthy or not as
// asked, and answers when its agent wrote so.
func (w *world) waitHave(ctx context.Context, node, fingerprint string, healthy bool) (time.Time, error) {
	key, _ := bus.HaveKey(node, module)
	var last bus.Have
	err := waitFor(ctx, fmt.Sprintf("%s running %s", node, fingerprint), func() bool {
		entry, err := w.bus.Haves.Get(ctx, key)
		if err != nil {
			return false
		}
		if last, err = bus.DecodeHave(entry.Value()); err != nil {
			return false
		}
		return last.Fingerprint == fingerprint && last.Phase == bus.PhaseRunning && (last.Health == bus.Healthy) == healthy
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("%w; last have %+v", err, last)
	}
	return last.At, nil
}

func (w *world) waitView(ctx context.Context, what string, ok func(view.Picture) bool) error {
	return waitFor(ctx, what, func() bool {
		p, err := w.view.Look(ctx)
		return err == nil && ok(p)
	})
}

func stateOf(p view.Picture, node string) view.State {
	for _, c := range p.Cells {
		if c.Node == node && c.Module == module {
			return c.State
		}
	}
	return ""
}

// serves is what node's module answers.
func (w *world) serves(node string) string {
	resp, err := http.Get("http://" + w.addrs[node] + "/") //nolint:noctx // the client's own timeout
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return string(body)
}

// waitFor polls cond until it holds, for a minute at most.
func waitFor(ctx context.Context, what string, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return errors.New("not within a minute: " + what)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
