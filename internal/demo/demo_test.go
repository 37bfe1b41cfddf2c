package demo_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/demo"
)

// TestStoryOnce is the kwok story's end-to-end test: the whole story
// against a cluster with controllers, kwok and the real Flagger, and the
// real release-gate binary, every step happening as expected. The node's
// story is told in internal/e2e/wholepath, on the estate its tests share.
func TestStoryOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := demo.Run(ctx, demo.Options{Once: true, Out: &out, Kwok: true})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"[Flagger] Canary auth-api: Initialized",
		"may-start   auth-api at 2f4a6c8e0b2d → 409 waiting for the render",
		"→ 409 waiting for job auth-migration-b87d7fecf08d",
		"→ 403 ",
		"gate log: {", // the migration started by the gate, and the release it held
		"checks      auth-ui at b87d7fecf08d → 409 new copy auth-ui: own traffic",
		"[Flagger] Canary auth-api: WaitingPromotion",
		"→ 409 barrier closed: auth-ui",
		"→ 200 barrier open",
		"[Flagger] Canary auth-ui: Succeeded",
		`"warmed": true`,
		`reason="stale-proof"`,
		"Where everything ran",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the transcript has no %q", want)
		}
	}
}
