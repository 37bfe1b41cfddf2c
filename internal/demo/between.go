package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// This file reads what the gate does between questions: the record it keeps
// of each Application, the Jobs it starts, and what /releases and /metrics
// answer.

// roundWait bounds a wait for the gate's next round, which comes every 15 s.
const roundWait = 40 * time.Second

// recordName is the gate's record of the sample Application, in its own namespace.
const recordName = namespace + "." + application + "-release-record"

// record is the part of the gate's record the story reads.
type record struct {
	Serving string `json:"serving"`
	Pinned  string `json:"pinned"`
	Warmup  *struct {
		Revision string `json:"revision"`
		Warmed   bool   `json:"warmed"`
	} `json:"warmup"`
}

// readRecord returns the record as the gate wrote it, and it decoded; raw is
// "" while there is none.
func (t *teller) readRecord(ctx context.Context) (raw string, r record, err error) {
	cm, err := t.kube.CoreV1().ConfigMaps(gateNS).Get(ctx, recordName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", record{}, nil
	}
	if err != nil {
		return "", record{}, fmt.Errorf("read the record %s/%s: %w", gateNS, recordName, err)
	}
	raw = cm.Data["record.json"]
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return "", record{}, fmt.Errorf("the record %s/%s: %w", gateNS, recordName, err)
	}
	return raw, r, nil
}

// awaitRecord waits for the gate's record to satisfy done and prints it.
func (t *teller) awaitRecord(ctx context.Context, what string, done func(record) bool) {
	t.await(ctx, what, t.roundWait, func(ctx context.Context) (string, bool, error) {
		raw, r, err := t.readRecord(ctx)
		if err != nil || raw == "" {
			return "no record " + gateNS + "/" + recordName + " yet", false, err
		}
		return "ConfigMap " + gateNS + "/" + recordName + ": " + indentJSON(raw), done(r), nil
	})
}

// awaitStarted waits for the gate's round to unsuspend the Job.
func (t *teller) awaitStarted(ctx context.Context, job string) {
	t.await(ctx, "the gate starts "+job, t.roundWait, func(ctx context.Context) (string, bool, error) {
		suspended, err := t.jobSuspended(ctx, job)
		if err != nil || suspended {
			return "Job " + job + ": suspend true", false, err
		}
		return "Job " + job + ": suspend false\ngate log: " + t.gate.logLine(`"msg":"migration started"`, job), true, nil
	})
}

// recordServing is the revision the gate's record says serves, as a tag;
// "nothing" when it names none.
func (t *teller) recordServing(ctx context.Context) (string, error) {
	_, r, err := t.readRecord(ctx)
	if err != nil {
		return "", err
	}
	if r.Serving == "" {
		return "nothing", nil
	}
	return tag(r.Serving), nil
}

// testedAgainst is the revision the applied inputs say the migration was
// tested against, as a tag; "nothing" when they name none.
func (t *teller) testedAgainst(ctx context.Context) (string, error) {
	name := release.InputsConfigMap(application)
	cm, err := t.kube.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read the inputs %s: %w", name, err)
	}
	in, err := release.CheckInputs(application, release.ConfigMap{Name: cm.Name, Labels: cm.Labels, Data: cm.Data})
	if err != nil {
		return "", err
	}
	if in.Migration == nil || in.Migration.TestedAgainst == "" {
		return "nothing", nil
	}
	return tag(in.Migration.TestedAgainst), nil
}

// jobSuspended reads whether the Job is still suspended.
func (t *teller) jobSuspended(ctx context.Context, name string) (bool, error) {
	j, err := t.kube.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("read Job %s: %w", name, err)
	}
	return j.Spec.Suspend != nil && *j.Spec.Suspend, nil
}

// releases prints the sample Application's entry of GET /releases once it
// satisfies done; the gate answers from one read for up to 15 s.
func (t *teller) releases(ctx context.Context, done func(record) bool) {
	t.say("GET /releases (a dashboard and the Reporter read it):")
	t.await(ctx, "/releases shows the record", t.roundWait, func(ctx context.Context) (string, bool, error) {
		status, body, err := t.gate.call(ctx, http.MethodGet, outsiderAddress, "/releases", nil)
		if err != nil {
			return "", false, err
		}
		var answer struct {
			Applications []struct {
				Namespace   string          `json:"namespace"`
				Application string          `json:"application"`
				Record      json.RawMessage `json:"record"`
			} `json:"applications"`
		}
		if status != http.StatusOK {
			return fmt.Sprintf("→ %d %s", status, body), false, nil
		}
		if err := json.Unmarshal([]byte(body), &answer); err != nil {
			return "", false, fmt.Errorf("/releases is not JSON: %w", err)
		}
		for _, a := range answer.Applications {
			if a.Namespace == namespace && a.Application == application {
				var r record
				err := json.Unmarshal(a.Record, &r)
				return "→ 200, the entry of " + namespace + "/" + application + "'s record: " + indentJSON(string(a.Record)), err == nil && done(r), nil
			}
		}
		return "→ 200 " + body, false, nil
	})
}

// metrics scrapes GET /metrics from from and prints the gate's own series.
func (t *teller) metrics(ctx context.Context, from string, want int, series string) {
	t.await(ctx, "/metrics from "+from, t.roundWait, func(ctx context.Context) (string, bool, error) {
		status, body, err := t.gate.call(ctx, http.MethodGet, from, "/metrics", nil)
		if err != nil {
			return "", false, err
		}
		if status != http.StatusOK {
			return fmt.Sprintf("→ %d %s", status, body), status == want, nil
		}
		var lines []string
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "release_gate_") {
				lines = append(lines, l)
			}
		}
		return "→ 200\n" + strings.Join(lines, "\n"), want == http.StatusOK && strings.Contains(body, series), nil
	})
}

func indentJSON(raw string) string {
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(raw), "", "  "); err != nil {
		return raw
	}
	return b.String()
}
