package demo

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

// TestStoryAgainstBrokenParts tells the story to a gate that answers every
// question with 418, then again once the API server stopped: every step it
// cannot play is noted, each wait ends, and nothing reads as success.
func TestStoryAgainstBrokenParts(t *testing.T) {
	cp := testenv.Own(t)
	root, err := findRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	tl := &teller{out: &out, root: root, dir: t.TempDir(), roundWait: 50 * time.Millisecond, flaggerWait: 50 * time.Millisecond}
	if err := tl.connect(cp); err != nil {
		t.Fatal(err)
	}
	if err := tl.writeKubeconfig(); err != nil {
		t.Fatal(err)
	}
	teapot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "a teapot", http.StatusTeapot)
	}))
	defer teapot.Close()
	tl.gate = &gateProcess{url: teapot.URL, logs: &testenv.LogBuffer{}}
	if tl.members, err = startMembers(ctx); err != nil {
		t.Fatal(err)
	}
	defer tl.members.stop()
	if err := tl.setUp(ctx); err != nil {
		t.Fatal(err)
	}

	for _, up := range []bool{true, false} {
		if !up {
			if err := cp.StopAPIServer(); err != nil {
				t.Fatal(err)
			}
			if err := tl.setUp(ctx); err == nil {
				t.Error("set up against a stopped API server")
			}
		}
		for _, c := range story() {
			tl.missed = nil
			err := c.play(ctx, tl)
			if err == nil && len(tl.missed) == 0 {
				t.Errorf("chapter %q (API server up: %v) read as success:\n%s", c.title, up, out.String())
			}
		}
	}
	tl.tell(ctx, story())
	if len(tl.missed) == 0 || !strings.Contains(out.String(), "✗") {
		t.Fatalf("a broken story noted nothing:\n%s", out.String())
	}
}

func TestRunOutsideTheRepository(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := Run(context.Background(), Options{Once: true, Out: &bytes.Buffer{}}); err == nil || !strings.Contains(err.Error(), "go.mod") {
		t.Fatalf("Run outside the repository: %v", err)
	}
}

// TestPrivateHostsRefused: where the hosts file cannot be mounted the gate
// does not start blind to the members' Canary services; the reason is said.
func TestPrivateHostsRefused(t *testing.T) {
	if args, err := testenv.PrivateHosts(context.Background(), filepath.Join(t.TempDir(), "no-such-hosts"), []string{"/bin/release-gate"}); err == nil {
		t.Fatalf("a private /etc/hosts from a file that is not there: %q", args)
	}
}

// TestGateThatExits: a gate that exits before it is ready is reported with
// its log, not waited for.
func TestGateThatExits(t *testing.T) {
	g := &gateProcess{url: "http://127.0.0.1:1", logs: &testenv.LogBuffer{}, exited: make(chan error, 1)}
	_, _ = g.logs.Write([]byte(`{"msg":"bad setting"}`))
	g.exited <- errors.New("exit status 2")
	if err := g.waitReady(context.Background()); err == nil || !strings.Contains(err.Error(), "bad setting") {
		t.Fatalf("waitReady on an exited gate: %v", err)
	}
	// Starting a gate that exits stops it next; that must not wait forever.
	g.cancel = func() {}
	stopped := make(chan struct{})
	go func() { g.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("stop waited forever on a gate that had already exited")
	}
}

func TestIndentJSON(t *testing.T) {
	if got := indentJSON("not json"); got != "not json" {
		t.Fatalf("indentJSON kept %q", got)
	}
	if _, err := os.Stat(filepath.Join("..", "..", examples, "platform.yaml")); err != nil {
		t.Fatalf("the sample estate: %v", err)
	}
}

func TestWebhookOf(t *testing.T) {
	canary := func(hooks ...any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "auth-api"},
			"spec":     map[string]any{"analysis": map[string]any{"webhooks": hooks}},
		}}
	}
	cases := []struct {
		name   string
		canary *unstructured.Unstructured
		err    string
	}{
		{"the webhook", canary(map[string]any{"name": "checks", "type": "rollout", "metadata": map[string]any{"process": "auth-api"}}), ""},
		{"no such webhook", canary(map[string]any{"name": "may-start"}), "no webhook checks"},
		{"metadata that is no string map", canary(map[string]any{"name": "checks", "metadata": map[string]any{"paths": []any{"/"}}}), "webhook checks"},
		{"webhooks that are no list", &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"analysis": map[string]any{"webhooks": "checks"}}}}, "canary"},
	}
	for _, c := range cases {
		md, err := webhookOf(c.canary, "checks")
		if c.err == "" && (err != nil || md["process"] != "auth-api") {
			t.Errorf("%s: %v %v", c.name, md, err)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: error %v, want one naming %q", c.name, err, c.err)
		}
	}
}

// TestWhere: left running, the transcript says so; once, it says it stops.
func TestWhere(t *testing.T) {
	for once, title := range map[bool]string{false: "Everything is still running", true: "stopping now"} {
		var out bytes.Buffer
		tl := &teller{out: &out, gate: &gateProcess{url: "http://127.0.0.1:8080", logFile: "release-gate.log"}, kubeconfig: "kubeconfig"}
		tl.where(once)
		if !strings.Contains(out.String(), title) || !strings.Contains(out.String(), "export KUBECONFIG=kubeconfig") {
			t.Errorf("where(%v):\n%s", once, out.String())
		}
	}
}
