package releasehistory

import (
	"fmt"
	"slices"
	"time"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

// days is the DORA facts of each day of the window, oldest first.
type days struct {
	deployed, failed []float64
	leads, restores  [][]time.Duration
}

// Charts are the four DORA figures over the PageDays days up to now, every
// service together, each deployment on the day it finished; each with its
// trend, the window's later half beside its earlier.
func Charts(recs []rr.Record, now time.Time) []Chart {
	since := now.Add(-PageDays * 24 * time.Hour)
	healthy := healthyByService(recs)
	d := days{deployed: make([]float64, PageDays), failed: make([]float64, PageDays),
		leads: make([][]time.Duration, PageDays), restores: make([][]time.Duration, PageDays)}
	for _, r := range recs {
		o, at := OutcomeOf(r), FinishedAt(r)
		if o == OutcomeInFlight || at.Before(since) || at.After(now) {
			continue
		}
		day := min(int(at.Sub(since)/(24*time.Hour)), PageDays-1)
		d.deployed[day]++
		if lead, ok := LeadTime(r); ok {
			d.leads[day] = append(d.leads[day], lead)
		}
		if o == OutcomeFailed {
			d.failed[day]++
			if restore, ok := RestoreTime(r, healthy[KeyOf(r)]); ok {
				d.restores[day] = append(d.restores[day], restore)
			}
		}
	}
	rate := make([]float64, PageDays)
	for i := range rate {
		if d.deployed[i] > 0 {
			rate[i] = 100 * d.failed[i] / d.deployed[i]
		}
	}
	all, early, late := d.figures(0, PageDays), d.figures(0, PageDays/2), d.figures(PageDays/2, PageDays)
	out := []Chart{
		chart("Deployment frequency", "deployments a day", d.deployed, false),
		chart("Lead time, merged to healthy", "median, merged to healthy", medians(d.leads), true),
		chart("Change failure rate", "% of deployments failed", rate, false),
		chart("Time to restore", "median, failure to healthy", medians(d.restores), true),
	}
	for i := range out {
		out[i].Figure = all[i]
		out[i].Trend = fmt.Sprintf("the last %d days %s; the %d before %s", PageDays-PageDays/2, late[i], PageDays/2, early[i])
	}
	return out
}

// figures are the four headlines over days [from, to).
func (d days) figures(from, to int) [4]string {
	var deployed, failed float64
	var leads, restores []time.Duration
	for i := from; i < to; i++ {
		deployed, failed = deployed+d.deployed[i], failed+d.failed[i]
		leads, restores = append(leads, d.leads[i]...), append(restores, d.restores[i]...)
	}
	rate := "—"
	if deployed > 0 {
		rate = fmt.Sprintf("%.0f%%", 100*failed/deployed)
	}
	return [4]string{fmt.Sprintf("%.1f a day", deployed/float64(to-from)), medianString(leads), rate, medianString(restores)}
}

func medians(days [][]time.Duration) []float64 {
	out := make([]float64, len(days))
	for i, d := range days {
		if len(d) > 0 {
			out[i] = float64(median(d))
		}
	}
	return out
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianString(d []time.Duration) string {
	if len(d) == 0 {
		return "—"
	}
	return "median " + HumanDuration(median(d))
}

// Bars are 8 px wide, 10 apart, at most 40 tall, on a 300×50 drawing; the
// axis is labelled with the tallest bar's value in the chart's unit.
func chart(title, unit string, values []float64, durations bool) Chart {
	format := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	if durations {
		format = func(v float64) string { return HumanDuration(time.Duration(v)) }
	}
	top := slices.Max(values)
	c := Chart{Title: title, Unit: unit, Top: format(top)}
	for i, v := range values {
		h := 0
		if top > 0 {
			h = int(40 * v / top)
		}
		c.Bars = append(c.Bars, Bar{X: i * 10, Y: 45 - h, Height: h, Label: fmt.Sprintf("%s: %s %s", dayName(PageDays-1-i), format(v), unit)})
	}
	return c
}

func dayName(back int) string {
	switch back {
	case 0:
		return "today"
	case 1:
		return "yesterday"
	}
	return fmt.Sprintf("%d days ago", back)
}
