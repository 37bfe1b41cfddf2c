package demo_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/demo"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/grants"
	"github.com/JorisJonkers-dev/delivery/internal/mesh/grants/grantstest"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// TestMain is also the story's module when the agents start the test
// binary with MESH_DEMO_MODULE set.
func TestMain(m *testing.M) {
	if os.Getenv("MESH_DEMO_MODULE") != "" {
		os.Exit(serveModule())
	}
	os.Exit(m.Run())
}

// serveModule serves the module until the agent's SIGTERM.
func serveModule() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := demo.ServeModule(ctx, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestTheStory tells the delivery and holds each step to what it says: the
// canary first and the others once it is healthy, the revision delivered,
// a failing build rolled back on the canary with no other node moving, a
// put of it by hand rolled back too, left alone by the assigner, stuck
// and said a stall, and compositions
// signed by an unknown key or altered by a byte refused on every node.
func TestTheStory(t *testing.T) { tellTheStory(t, "", nil) }

// TestTheStoryOnItsOwnCredentials tells it on a server in operator mode,
// every agent, the assigner, the watchman and the view each on the user
// grants gives it, and the operator's steps on the operator's.
func TestTheStoryOnItsOwnCredentials(t *testing.T) {
	s := grantstest.Start(t)
	tellTheStory(t, s.URL, s.Connect)
}

// TestTheStoryOnTheRealServer tells it on the built nats-server binary.
func TestTheStoryOnTheRealServer(t *testing.T) { tellTheStory(t, testenv.NewNATS(t).URL, nil) }

func tellTheStory(t *testing.T, url string, connect func(grants.Part, string) (*nats.Conn, error)) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, logs := &testenv.LogBuffer{}, &testenv.LogBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s := demo.Story{Out: out, Logs: logs, Module: []string{self}, ModuleEnv: map[string]string{"MESH_DEMO_MODULE": "1"},
		Dir: t.TempDir(), StuckAfter: 2 * time.Second, URL: url, Connect: connect}
	if err := s.Run(ctx); err != nil {
		t.Fatalf("%v\n%s\nlogs:\n%s", err, out, logs)
	}
	for _, step := range []string{
		`n1, the canary, applied f1 first: it answers "f1"`,
		`n2 followed once the canary was healthy: it answers "f1"`,
		"revision rev-1 is delivered",
		`n1 applied f2, which did not pass its health within 3s: it went back to f1 by itself and answers "f1"`,
		"The assigner takes f2 as failed on n1",
		`n3 did not move: it still runs f1 and answers "f1"`,
		"n3 tried f2 as put, and it went back to f1 too",
		"n3 is stuck on f2",
		"The watchman: a stall",
		"every node is given f3, signed by a key no node trusts",
		`n2 refused it (the composition does not verify`,
		"every node is given f4, altered by one byte",
		`n3 refused it (the composition's digest`,
	} {
		if !strings.Contains(out.String(), step) {
			t.Errorf("the story does not say %q:\n%s", step, out)
		}
	}
}
