package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/JorisJonkers-dev/delivery/internal/cli/clitest"
	"github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	"github.com/JorisJonkers-dev/delivery/internal/releaserecord"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
)

const sweepRBAC = "../../deploy/release-record-sweep/rbac.yaml"

// sweepVariables are the variables the sweep's table in
// docs/release-record.md names.
var sweepVariables = []string{"RECORD_NAMESPACE", "RELEASE_STALL_MINUTES", "RECORD_TTL_DAYS", "KEEP_HEALTHY", "KUBECONFIG", "LOG_LEVEL"}

// seed writes a release merged an hour ago with no fact since, and one
// aborted 20 days ago: one to say, one to delete.
func seed(t *testing.T, cp *testenv.ControlPlane, ns string) (stalled, old releaserecord.Record) {
	t.Helper()
	mk := func(version string, state releaserecord.State, at time.Time) releaserecord.Record {
		id, err := releaserecord.NewReleaseID("docs", version, "prod-eu", "prod")
		if err != nil {
			t.Fatal(err)
		}
		r := releaserecord.NewRecord(releaserecord.Release{ID: id}, at)
		r.State, r.StateAt, r.LastFactAt = state, at, at
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: r.Name(), Namespace: ns, Labels: r.Labels()}, Data: r.Data()}
		if _, err := cp.Kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	return mk("2.1.0", releaserecord.StateMerged, time.Now().Add(-time.Hour)), mk("2.0.0", releaserecord.StateAborted, time.Now().Add(-20*24*time.Hour))
}

func sweepOnce(env map[string]string) (code int, stdout, logs string) {
	var out bytes.Buffer
	l := &testenv.LogBuffer{}
	code = run(context.Background(), []string{"sweep"}, testenv.Getenv(env), time.Now, &out, l)
	return code, out.String(), l.String()
}

// actions reads the sweep's output lines as action and record.
func actions(t *testing.T, stdout string) []string {
	t.Helper()
	var out []string
	for line := range strings.Lines(stdout) {
		var l struct{ Action, Record string }
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		out = append(out, l.Action+" "+l.Record)
	}
	return out
}

// TestSweepUnderItsGrant runs release-record sweep whole, twice: the first
// raises the stall and deletes the old record, each said as a line; the
// second finds nothing to do.
func TestSweepUnderItsGrant(t *testing.T) {
	cp := testenv.Shared(t)
	ns, kubeconfig := cp.GrantRecordsKubeconfig(t, sweepRBAC, "release-record-sweep")
	env := map[string]string{"RECORD_NAMESPACE": ns, "KUBECONFIG": kubeconfig}
	stalled, old := seed(t, cp, ns)
	code, stdout, logs := sweepOnce(env)
	if got := actions(t, stdout); code != 0 || len(got) != 2 || got[0] != "stalled "+stalled.Name() || got[1] != "deleted "+old.Name() {
		t.Fatalf("exit %d, lines %q; logs:\n%s", code, got, logs)
	}
	if !strings.Contains(logs, `"msg":"swept"`) || !strings.Contains(logs, `"raised":1,"deleted":1`) {
		t.Fatalf("no summary line:\n%s", logs)
	}
	code, stdout, logs = sweepOnce(env)
	if code != 0 || stdout != "" {
		t.Fatalf("the second sweep: exit %d, stdout %q; logs:\n%s", code, stdout, logs)
	}
	cm, err := cp.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), stalled.Name(), metav1.GetOptions{})
	if err != nil || cm.Labels[releasehistory.LabelStallAlerted] != "merged" {
		t.Fatalf("%v %v", cm.Labels, err)
	}
}

// TestSweepFailsOnAFailedCall: under a grant without delete, the sweep
// raises the stall, fails the deletion and exits 1 with one line naming
// why.
func TestSweepFailsOnAFailedCall(t *testing.T) {
	cp := testenv.Shared(t)
	ns, kubeconfig := cp.GrantRecordsKubeconfig(t, sweepRBAC, "release-record-sweep", "verbs: [list, patch, delete]", "verbs: [list, patch]")
	env := map[string]string{"RECORD_NAMESPACE": ns, "KUBECONFIG": kubeconfig}
	stalled, old := seed(t, cp, ns)
	code, stdout, logs := sweepOnce(env)
	if got := actions(t, stdout); code != 1 || len(got) != 1 || got[0] != "stalled "+stalled.Name() {
		t.Fatalf("exit %d, lines %q; logs:\n%s", code, got, logs)
	}
	var failed []string
	for line := range strings.Lines(logs) {
		if strings.Contains(line, `"level":"ERROR"`) {
			failed = append(failed, line)
		}
	}
	if len(failed) != 1 || !strings.Contains(failed[0], `"msg":"sweep failed"`) || !strings.Contains(failed[0], old.Name()) || !strings.Contains(failed[0], "forbidden") {
		t.Fatalf("error lines %q", failed)
	}
}

func TestSweepBadSettingsStop(t *testing.T) {
	cfg, err := loadSweepConfig(testenv.Getenv(nil))
	if want := (releasehistory.SweepPolicy{StallAfter: 45 * time.Minute, TTL: 14 * 24 * time.Hour, KeepHealthy: 5}); err != nil ||
		cfg.namespace != "delivery-system" || cfg.policy != want {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
	for name, change := range map[string][2]string{
		"stall minutes not a number": {"RELEASE_STALL_MINUTES", "soon"},
		"stall minutes zero":         {"RELEASE_STALL_MINUTES", "0"},
		"a TTL in a unit":            {"RECORD_TTL_DAYS", "14d"},
		"a negative TTL":             {"RECORD_TTL_DAYS", "-1"},
		"no rollback window":         {"KEEP_HEALTHY", "0"},
		"a window not a number":      {"KEEP_HEALTHY", "five"},
	} {
		code, stdout, logs := sweepOnce(map[string]string{change[0]: change[1]})
		if code != 2 || stdout != "" {
			t.Errorf("%s: exit %d, stdout %q", name, code, stdout)
		}
		if lines := strings.Count(strings.TrimSpace(logs), "\n") + 1; lines != 1 || !strings.Contains(logs, change[0]) {
			t.Errorf("%s: log %q", name, logs)
		}
	}
	if code, _, logs := sweepOnce(map[string]string{"KUBECONFIG": filepath.Join(t.TempDir(), "missing")}); code != 2 || !strings.Contains(logs, "KUBECONFIG") {
		t.Fatalf("no cluster: exit %d, log %q", code, logs)
	}
}

// TestSweepCommandLine holds the sweep to its help and its mistakes; the
// version and completion are the binary's own, which TestCommandLine holds.
func TestSweepCommandLine(t *testing.T) {
	unread := func(name string) string {
		t.Errorf("the sweep read %s before it answered its command line", name)
		return ""
	}
	for _, help := range [][]string{{"sweep", "--help"}, {"sweep", "-h"}, {"help", "sweep"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), help, unread, time.Now, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "Usage:\n  release-record sweep") {
			t.Errorf("%q: exit %d, stdout %s", help, code, stdout.String())
		}
		for _, v := range append([]string{"LOG_LEVEL"}, sweepVariables...) {
			if !strings.Contains(stdout.String(), v) {
				t.Errorf("%q does not name %s", help, v)
			}
		}
	}
	for _, mistake := range [][]string{{"sweep", "--no-such-flag"}, {"sweep", "now"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), mistake, unread, time.Now, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "Usage:") {
			t.Errorf("%q: exit %d, stderr %s", mistake, code, stderr.String())
		}
	}
}

// TestSweepHelpNamesEveryVariableItReads runs the sweep to the cluster,
// the last thing it reads.
func TestSweepHelpNamesEveryVariableItReads(t *testing.T) {
	env := clitest.Record(map[string]string{"KUBECONFIG": filepath.Join(t.TempDir(), "missing")})
	logs := &testenv.LogBuffer{}
	if code := run(context.Background(), []string{"sweep"}, env.Getenv, time.Now, io.Discard, logs); code != 2 || !strings.Contains(logs.String(), "KUBECONFIG") {
		t.Fatalf("exit %d, log %q", code, logs)
	}
	env.Named(t, sweepVariables)
}
