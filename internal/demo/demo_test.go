package demo_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/demo"
)

// TestStoryOnce is the end-to-end test: the whole story against a real API
// server and the real release-gate binary, every step answering as expected.
func TestStoryOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := demo.Run(ctx, demo.Options{Once: true, Out: &out})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"→ 409 waiting for job auth-migration-b87d7fecf08d",
		"→ 403 ",
		"gate log: {", // the migration started by the gate, and the release it held
		"→ 409 new copy auth-api: own traffic: failed share",
		"→ 409 barrier closed: auth-ui",
		"→ 200 barrier open",
		`"warmed": true`,
		`reason="stale-proof"`,
		"Where everything ran",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the transcript has no %q", want)
		}
	}
}
