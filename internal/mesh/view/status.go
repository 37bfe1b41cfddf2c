package view

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/mesh/bus"
)

// The terminal's colours for a state; none when the output is no terminal.
var colours = map[State]string{StateSettled: "\x1b[32m", StateMoving: "\x1b[33m", StateStuck: "\x1b[31m"}

const reset = "\x1b[0m"

// Render writes the table a person wants: the revision and whether it is
// delivered, then each module on each node, its want beside its have, and
// where it stands, coloured on a terminal.
func Render(w io.Writer, p Picture, now time.Time, colour bool) error {
	paint := func(s State) string {
		if !colour {
			return string(s)
		}
		return colours[s] + string(s) + reset
	}
	switch {
	case p.Revision == "":
		fmt.Fprintln(w, "no source revision written (mesh source)")
	case p.Delivered && len(p.Offline) > 0:
		fmt.Fprintf(w, "revision %s: delivered, without the offline %s\n", p.Revision, strings.Join(p.Offline, ", "))
	case p.Delivered:
		fmt.Fprintf(w, "revision %s: delivered\n", p.Revision)
	default:
		fmt.Fprintf(w, "revision %s: not delivered\n", p.Revision)
	}
	if len(p.Cells) == 0 {
		_, err := fmt.Fprintln(w, "no node wants any module yet")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODULE\tNODE\tWANT\tHAVE\tSTATE\tSINCE")
	for _, c := range p.Cells {
		want := short(c.Want.Fingerprint)
		if c.Want.Owner != bus.OwnerRules {
			want += " (" + string(c.Want.Owner) + ")"
		}
		have := "-"
		if h := c.Have; h != nil {
			have = fmt.Sprintf("%s %s/%s", short(h.Fingerprint), h.Phase, h.Health)
			if h.Digest != c.Want.Digest && h.Fingerprint == c.Want.Fingerprint {
				have += " (another composition)"
			}
			if h.Attempt.Fingerprint != "" {
				have += " (attempt " + short(h.Attempt.Fingerprint) + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s ago\n", c.Module, c.Node, want, have, paint(c.State), now.Sub(c.Since).Round(time.Second))
	}
	return tw.Flush()
}

// short is a fingerprint as a person reads it: its first 12 characters.
func short(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	if fp == "" {
		return "-"
	}
	return fp
}
