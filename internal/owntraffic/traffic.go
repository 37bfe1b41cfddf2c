package owntraffic

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Traffic is what one iteration's own traffic met.
type Traffic struct {
	Requests int
	// Failed counts 5xx answers and requests with no answer.
	Failed int
	// Answered counts requests that met any HTTP answer, 5xx included.
	Answered int
	// P95 is the 95th percentile (nearest rank) of the answered requests'
	// latency; 0 when none was answered.
	P95 time.Duration
	// Failures are the first MaxFailures failed requests, in request order.
	Failures []Answer
}

// FailedShare is Failed over Requests, 0 when nothing was requested.
func (t Traffic) FailedShare() float64 {
	if t.Requests == 0 {
		return 0
	}
	return float64(t.Failed) / float64(t.Requests)
}

// OwnTraffic requests every path at base (see CanaryBase) once per round,
// Rounds times over, with at most the Sender's concurrency in flight, and
// sums up what the requests met. Paths repeated in the list are requested
// once per round. A path that CheckPath refuses, a base that is not an http
// origin or more than MaxPaths+1 paths are an error before any request; so is
// ctx ending before every request was made or answered, since the asker has
// gone and the figures are partial. The Sender's budget ending first is the
// copy's doing: the requests it cut, made or not, count as unanswered, and
// the figures say so. With no path nothing is requested and Judge says no;
// a member the Canary hands no path is the caller's to hold to its pods
// alone.
func (p *Sender) OwnTraffic(ctx context.Context, base string, paths []string) (Traffic, error) {
	origin, err := checkBase(base)
	if err != nil {
		return Traffic{}, err
	}
	distinct, err := distinctPaths(paths)
	if err != nil {
		return Traffic{}, err
	}
	run, cancel := context.WithTimeout(ctx, p.budget)
	defer cancel()
	answers := make([]Answer, Rounds*len(distinct))
	for i := range answers {
		answers[i] = Answer{Path: distinct[i%len(distinct)], Cause: "not requested within the budget of " + p.budget.String()}
	}
	slots := make(chan struct{}, p.concurrency)
	var wg sync.WaitGroup
dispatch:
	for i := range answers {
		select {
		case slots <- struct{}{}:
		case <-run.Done():
			break dispatch
		}
		wg.Go(func() {
			defer func() { <-slots }()
			a := get(run, p.client, p.timeout, origin.String()+answers[i].Path)
			a.Path = answers[i].Path
			answers[i] = a
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Traffic{}, fmt.Errorf("own traffic to %s: %w", origin.Host, err)
	}
	return Summarize(answers), nil
}

// Summarize counts what the answers met, in request order.
func Summarize(answers []Answer) Traffic {
	t := Traffic{Requests: len(answers)}
	latencies := make([]time.Duration, 0, len(answers))
	for _, a := range answers {
		if a.Status != 0 {
			t.Answered++
			latencies = append(latencies, a.Latency)
		}
		if a.Failed() {
			t.Failed++
			if len(t.Failures) < MaxFailures {
				t.Failures = append(t.Failures, a)
			}
		}
	}
	t.P95 = percentile95(latencies)
	return t
}

// percentile95 is the nearest-rank 95th percentile: the smallest latency at
// or below which 95% of the latencies lie.
func percentile95(latencies []time.Duration) time.Duration {
	if len(latencies) == 0 {
		return 0
	}
	sorted := slices.Clone(latencies)
	slices.Sort(sorted)
	rank := int(math.Ceil(0.95 * float64(len(sorted))))
	return sorted[rank-1]
}

// Thresholds are the platform's limits for a member's own traffic.
type Thresholds struct {
	// ErrorRate is the largest failed share that passes, from 0 to 1.
	ErrorRate float64
	// Latency is the largest p95 of answered requests that passes.
	Latency time.Duration
}

// Validate refuses thresholds that no traffic could be judged by.
func (th Thresholds) Validate() error {
	var errs []error
	if math.IsNaN(th.ErrorRate) || th.ErrorRate < 0 || th.ErrorRate > 1 {
		errs = append(errs, fmt.Errorf("error rate %v is not a share from 0 to 1", th.ErrorRate))
	}
	if th.Latency <= 0 {
		errs = append(errs, fmt.Errorf("latency %v is not positive", th.Latency))
	}
	return errors.Join(errs...)
}

// Verdict is a yes or no with a short reason fit for a webhook answer.
type Verdict struct {
	Pass   bool
	Reason string
}

// Judge decides an iteration from its traffic: it fails when no request
// succeeded (no data is no), when the failed share is over th.ErrorRate, or
// when the p95 of answered requests is over th.Latency; a figure exactly at
// its threshold passes. The reason carries the figures.
func Judge(t Traffic, th Thresholds) Verdict {
	figures := fmt.Sprintf("%d of %d requests failed, p95 %s", t.Failed, t.Requests, t.P95)
	var why []string
	if t.Requests-t.Failed <= 0 {
		why = append(why, "no request succeeded")
	} else {
		if share := t.FailedShare(); share > th.ErrorRate {
			why = append(why, fmt.Sprintf("failed share %s over %s", percent(share), percent(th.ErrorRate)))
		}
		if t.P95 > th.Latency {
			why = append(why, fmt.Sprintf("p95 %s over %s", t.P95, th.Latency))
		}
	}
	if len(why) == 0 {
		return Verdict{Pass: true, Reason: "own traffic: " + figures}
	}
	reason := "own traffic: " + strings.Join(why, ", ") + " (" + figures
	if len(t.Failures) > 0 {
		reason += "; first " + t.Failures[0].String()
	}
	return Verdict{Reason: reason + ")"}
}

// percent shows a share to two decimals of a percent, without trailing zeros.
func percent(share float64) string {
	return strconv.FormatFloat(math.Round(share*10000)/100, 'f', -1, 64) + "%"
}
